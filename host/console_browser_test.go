package host_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"google.golang.org/grpc/metadata"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
)

// screenshotsEnv names the environment variable that makes the browser
// tests write their screenshots of the console into docs/ (make
// console-screenshots); normal runs leave the tree alone.
const screenshotsEnv = "LOOM_CONSOLE_SCREENSHOTS"

// chromiumPath returns the headless browser the console's tests drive. A
// machine without one skips them with a warning; CI (CI=true) must have
// one (.ci/run installs Debian's chromium).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no Chromium found: CI must run the console's browser tests (apt-get install -y chromium)")
	}
	t.Skip("warning: no Chromium found (apt-get install -y chromium): the console's browser tests are skipped")
	return ""
}

// browser is a headless Chromium tab that records the origin of every
// request it makes.
type browser struct {
	ctx context.Context

	mu      sync.Mutex
	origins map[string]bool
	errors  []string // the page's exceptions and log entries
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)), chromedp.NoSandbox, chromedp.WindowSize(1280, 800))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{origins: map[string]bool{}}
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithListener(b.record))
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b.ctx = ctx
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting Chromium: %v", err)
	}
	return b
}

// record notes the origin of a request the page makes.
func (b *browser) record(ev any) {
	switch e := ev.(type) {
	case *cdpruntime.EventExceptionThrown:
		b.mu.Lock()
		b.errors = append(b.errors, fmt.Sprintf("%s %+v", e.ExceptionDetails.Text, e.ExceptionDetails.Exception))
		b.mu.Unlock()
	case *cdplog.EventEntryAdded:
		b.mu.Lock()
		b.errors = append(b.errors, e.Entry.Text)
		b.mu.Unlock()
	}
	req, ok := ev.(*network.EventRequestWillBeSent)
	if !ok {
		return
	}
	origin := req.Request.URL
	if u, err := url.Parse(origin); err == nil {
		origin = u.Scheme + "://" + u.Host
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.origins[origin] = true
}

// run runs actions within d.
func (b *browser) run(t *testing.T, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// text returns the text of the element sel, waiting for it.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitText waits until the text of sel satisfies ok.
func (b *browser) waitText(t *testing.T, sel string, d time.Duration, ok func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, time.Until(deadline))
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+quoteJS(sel)+`)||{}).innerText||""`))
		cancel()
		if err == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after %s: %q (error %v); the page: %q", sel, d, s, err, b.page())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// page returns the text of the page, for failures.
func (b *browser) page() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
	if err != nil {
		s = err.Error()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return s + "\nlog: " + strings.Join(b.errors, "\n")
}

func quoteJS(s string) string { return "'" + strings.ReplaceAll(s, "'", `\'`) + "'" }

// screenshot writes the page into docs/name when screenshotsEnv is set.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	if os.Getenv(screenshotsEnv) == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// requireSameOrigin fails unless every request the page made went to
// origin.
func (b *browser) requireSameOrigin(t *testing.T, origin string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.origins) == 0 {
		t.Fatal("no request recorded")
	}
	for o := range b.origins {
		if o != origin {
			t.Errorf("the console made a request to %s, another origin than its own (%s)", o, origin)
		}
	}
}

// TestConsoleBrowser drives the console of a development host in headless
// Chromium: the overview lists the types and controllers, a resource
// written over gRPC appears in the open type page within a second and
// vanishes when deleted, and no request leaves the console's origin.
func TestConsoleBrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	h := startHost(t, "-dev")
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	base := "http://" + h.httpAddr + "/ui/"

	zip := resourcetest.Resource(foo.ZipType, "z1").WithData(t, &pbfoov1.Zip{}).Write(t, client)
	for _, name := range []string{"alpha", "beta"} {
		resourcetest.Resource(foo.BarV1Type, name).WithData(t, &pbfoov1.Bar{Baz: name, Qux: zip.Id}).Write(t, client)
	}

	b.run(t, 10*time.Second, chromedp.Navigate(base))
	b.waitText(t, "#types", 5*time.Second, func(s string) bool { return strings.Contains(s, "foo.v1.Bar") && strings.Contains(s, "foo.v1.Zip") })
	b.waitText(t, "#controllers", 5*time.Second, func(s string) bool {
		return strings.Contains(s, foo.BarControllerName) && strings.Contains(s, "tombstone-reaper") && strings.Contains(s, "leading")
	})
	b.screenshot(t, "console-overview.png")

	b.run(t, 10*time.Second, chromedp.Navigate(base+"#/type/foo.v1.Bar"))
	b.waitText(t, "#live", 5*time.Second, func(s string) bool { return strings.Contains(s, "live") })
	b.waitText(t, "#rows", 5*time.Second, func(s string) bool { return strings.Contains(s, "alpha") && strings.Contains(s, "Accepted") })

	written := time.Now()
	gamma := resourcetest.Resource(foo.BarV1Type, "gamma").WithData(t, &pbfoov1.Bar{Baz: "g"}).Write(t, client)
	b.waitText(t, "#rows", time.Second, func(s string) bool { return strings.Contains(s, "gamma") })
	t.Logf("a new resource showed in %s", time.Since(written))
	b.waitText(t, "#rows", 5*time.Second, func(s string) bool { return strings.Count(s, "Accepted") == 3 })
	b.screenshot(t, "console-type.png")

	deleted := time.Now()
	if _, err := client.Delete(context.Background(), &pbresource.DeleteRequest{Id: gamma.Id}); err != nil {
		t.Fatal(err)
	}
	b.waitText(t, "#rows", time.Second, func(s string) bool { return !strings.Contains(s, "gamma") })
	t.Logf("a deleted resource vanished in %s", time.Since(deleted))

	b.run(t, 10*time.Second, chromedp.Navigate(base+"#/resource/foo.v1.Bar/default/default/alpha"))
	b.waitText(t, "#data", 5*time.Second, func(s string) bool { return strings.Contains(s, `"baz": "alpha"`) })
	b.waitText(t, "#history", 5*time.Second, func(s string) bool { return s != "" })
	b.screenshot(t, "console-resource.png")

	b.requireSameOrigin(t, "http://"+h.httpAddr)
}

// TestConsoleBrowserStuck: on a host that does not run the Bar
// controller (-controllers=false), a Bar never gets its status, and the
// Stuck page lists it once it has waited longer than -ui-stuck-after.
func TestConsoleBrowserStuck(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	h := startHost(t, "-dev", "-controllers=false", "-ui-stuck-after", "100ms")
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	resourcetest.Resource(foo.BarV1Type, "forgotten").WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, client)
	time.Sleep(150 * time.Millisecond) // the threshold itself is what is tested

	b.run(t, 10*time.Second, chromedp.Navigate("http://"+h.httpAddr+"/ui/#/stuck"))
	s := b.waitText(t, "#lagging", 5*time.Second, func(s string) bool { return strings.Contains(s, "forgotten") })
	if !strings.Contains(s, foo.BarControllerName) {
		t.Errorf("the Stuck page does not name the controller the resource waits for: %q", s)
	}
	b.screenshot(t, "console-stuck.png")
	b.requireSameOrigin(t, "http://"+h.httpAddr)
}

// consoleACL lets "zips" read Zips and nothing else.
const consoleACL = `tokens:
  - name: zips
    secret: "zips-secret"
    rules:
      - {type: "foo.v1.Zip", partition: "*", namespace: "*", access: list}
      - {type: "foo.v1.Zip", partition: "*", namespace: "*", access: read}
  - name: writer
    secret: "writer-secret"
    rules:
      - {type: "*.*.*", partition: "*", namespace: "*", access: write}
`

// TestConsoleBrowserACL: with ACLs on, the console asks for a token, and
// a token that may read only Zips sees only Zips.
func TestConsoleBrowserACL(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	aclFile := writeFile(t, t.TempDir(), "acl.yaml", []byte(consoleACL))
	h := startHost(t, "-dev", "-acl-file", aclFile)
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-consul-token", "writer-secret")
	z := resourcetest.Resource(foo.ZipType, "visible-zip").WithData(t, &pbfoov1.Zip{}).Build()
	b2 := resourcetest.Resource(foo.BarV1Type, "hidden-bar").WithData(t, &pbfoov1.Bar{Baz: "x"}).Build()
	for _, r := range []*pbresource.Resource{z, b2} {
		if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: r}); err != nil {
			t.Fatal(err)
		}
	}

	base := "http://" + h.httpAddr + "/ui/"
	b.run(t, 10*time.Second, chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS(`input[name="token"]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name="token"]`), "zips-secret"),
		chromedp.Submit(chromedp.CSS(`form.login`)))
	types := b.waitText(t, "#types", 5*time.Second, func(s string) bool { return strings.Contains(s, "foo.v1.Zip") })
	if strings.Contains(types, "foo.v1.Bar") || strings.Contains(types, "Lease") {
		t.Errorf("a token that may read only Zips sees other types: %q", types)
	}
	b.run(t, 10*time.Second, chromedp.Navigate(base+"#/type/foo.v1.Zip"))
	b.waitText(t, "#rows", 5*time.Second, func(s string) bool { return strings.Contains(s, "visible-zip") })
	b.run(t, 10*time.Second, chromedp.Navigate(base+"#/type/foo.v1.Bar"))
	msg := b.waitText(t, "#main", 5*time.Second, func(s string) bool {
		return strings.Contains(s, "denied") || strings.Contains(s, "not allowed") || strings.Contains(s, "permission")
	})
	if strings.Contains(msg, "hidden-bar") {
		t.Errorf("a token that may not read Bars sees one: %q", msg)
	}
	b.run(t, 10*time.Second, chromedp.Navigate(base+"#/stuck"))
	stuck := b.text(t, "#main")
	if strings.Contains(stuck, "hidden-bar") {
		t.Errorf("the Stuck page shows a Bar to a token that may not read Bars: %q", stuck)
	}
	b.requireSameOrigin(t, "http://"+h.httpAddr)
}
