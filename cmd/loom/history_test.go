package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
	"github.com/loomrt/loom/storage/inmem"
)

// loomIn runs loom in this process against addr, and returns what it
// printed (the error as main prints it, on stderr) and its exit status.
func loomIn(addr string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), append(args, "-addr", addr), &out, &errOut)
	code = exitCode(err, &errOut)
	return out.String(), errOut.String(), code
}

// loomOK runs loom in process and fails the test unless it succeeds.
func loomOK(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, errOut, code := loomIn(addr, args...)
	if code != 0 {
		t.Fatalf("loom %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

// column returns the cells of the named column of a table loom printed,
// row by row: what is under the name, up to the next column's.
func column(t *testing.T, table, name string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
	start := strings.Index(lines[0], name)
	if start < 0 {
		t.Fatalf("no column %s in\n%s", name, table)
	}
	end := -1
	if next := regexp.MustCompile(`\s\S`).FindStringIndex(lines[0][start:]); next != nil {
		end = start + next[0] + 1
	}
	var cells []string
	for _, l := range lines[1:] {
		cell := l[min(start, len(l)):]
		if end >= 0 {
			cell = l[min(start, len(l)):min(end, len(l))]
		}
		cells = append(cells, strings.TrimSpace(cell))
	}
	return cells
}

// waitGone waits until the Bar named name is deleted (the reaper's cascade).
func waitGone(t *testing.T, client pbresource.ResourceServiceClient, name string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	id := barResource(t, name, "x").Id
	for {
		_, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: id})
		if status.Code(err) == codes.NotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not deleted within %s (last read: %v)", name, within, err)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}

const historyBars = `id: {type: foo.v1.Bar, name: parent}
data: {'@type': type.googleapis.com/loom.example.foo.v1.Bar, baz: one}
---
id: {type: foo.v1.Bar, name: child}
owner: {type: foo.v1.Bar, name: parent}
data: {'@type': type.googleapis.com/loom.example.foo.v1.Bar, baz: kid}
`

// testHistoryCommands drives history, diff, trash and restore against a
// server running the example controller (which adds a finalizer to each
// Bar and writes its status) and the reaper.
func testHistoryCommands(t *testing.T, addr string) {
	client := pbresource.NewResourceServiceClient(dialServer(t, addr))
	parentID, childID := barResource(t, "parent", "x").Id, barResource(t, "child", "x").Id
	file := writeFile(t, "bars.yaml", historyBars)
	loomOK(t, addr, "apply", "-f", file)
	waitObserved(t, client, parentID, 10*time.Second)
	loomOK(t, addr, "apply", "-f", writeFile(t, "bars.yaml", strings.Replace(historyBars, "baz: one", "baz: two", 1)))
	waitObserved(t, client, parentID, 10*time.Second)
	waitObserved(t, client, childID, 10*time.Second)

	// Created, the controller's finalizer, the new data; none of the
	// controller's status writes.
	out := loomOK(t, addr, "history", "foo.v1.Bar", "parent")
	if !regexp.MustCompile(`^VERSION\s+GENERATION\s+AGE\s+BY\s+CHANGE\n`).MatchString(out) {
		t.Errorf("history's header:\n%s", out)
	}
	if got, want := strings.Join(column(t, out, "CHANGE"), "|"), "data|metadata|created"; got != want {
		t.Errorf("history's changes: %s, want %s; history:\n%s", got, want, out)
	}
	versions := column(t, out, "VERSION")
	created := versions[2]

	out = loomOK(t, addr, "diff", "foo.v1.Bar", "parent")
	if !strings.Contains(out, "\n-  baz: one\n+  baz: two\n") || !strings.Contains(out, "--- foo.v1.Bar/default.default/parent@") ||
		strings.Contains(out, "+  finalizers") || strings.Contains(out, "-  finalizers") {
		t.Errorf("diff of the last change:\n%s", out)
	}
	out = loomOK(t, addr, "diff", "foo.v1.Bar", "parent", created)
	if !strings.Contains(out, "+metadata:\n+  finalizers: foo.bar/cleanup\n") || !strings.Contains(out, "+  baz: two") {
		t.Errorf("diff from the creation to now:\n%s", out)
	}
	if out := loomOK(t, addr, "diff", "foo.v1.Bar", "parent", versions[1], versions[1]); !strings.HasPrefix(out, "No difference") {
		t.Errorf("diff of a version with itself: %s", out)
	}
	for _, bad := range [][]string{{"diff", "foo.v1.Bar", "parent", "x"}, {"restore", "foo.v1.Bar", "parent", "-version", "v1"}} {
		if _, errOut, code := loomIn(addr, bad...); code != 2 || !strings.Contains(errOut, `"x" is not a version`) && !strings.Contains(errOut, `"v1" is not a version`) {
			t.Errorf("loom %v: exit %d, %s; want a usage error naming the version", bad, code, errOut)
		}
	}
	if _, errOut, code := loomIn(addr, "history", "foo.v1.Bar", "nope"); code != 1 || !strings.Contains(errOut, "no version of foo.v1.Bar/nope is kept") {
		t.Errorf("history of a name never used: exit %d, %s", code, errOut)
	}

	// Deleting the parent cascades to the child, through the reaper.
	loomOK(t, addr, "delete", "foo.v1.Bar", "parent")
	waitGone(t, client, "parent", 10*time.Second)
	waitGone(t, client, "child", 10*time.Second)
	out = loomOK(t, addr, "trash", "foo.v1.Bar")
	if !regexp.MustCompile(`(?m)^child\s+default\.default\s+\w{26}\s+\d+s\s+\d+\s+cascade from foo\.v1\.Bar/default\.default/parent$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^parent\s+default\.default\s+\w{26}\s+\d+s\s+\d+\s+-$`).MatchString(out) {
		t.Errorf("trash:\n%s", out)
	}
	if _, errOut, _ := loomIn(addr, "trash", "foo.v1.Bar", "-prefix", "zz"); errOut != "No deleted resources found.\n" {
		t.Errorf("an empty trash: %q", errOut)
	}
	out = loomOK(t, addr, "history", "foo.v1.Bar", "child")
	if changes := column(t, out, "CHANGE"); changes[0] != "deleted (cascade from foo.v1.Bar/default.default/parent)" {
		t.Errorf("the child's history:\n%s", out)
	}

	// Restored with what it owned: the child is owned by the new parent.
	out = loomOK(t, addr, "restore", "foo.v1.Bar", "parent", "-with-owned")
	parent, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: parentID})
	if err != nil {
		t.Fatal(err)
	}
	child, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: childID})
	if err != nil {
		t.Fatalf("the child was not restored: %v; restore printed\n%s", err, out)
	}
	want := "foo.v1.Bar/default.default/parent restored: uid " + parent.Resource.Id.Uid + ", version "
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "\nfoo.v1.Bar/default.default/child restored (owned, from version ") ||
		child.Resource.Owner.GetUid() != parent.Resource.Id.Uid || bazOf(t, parent.Resource) != "two" {
		t.Errorf("restore -with-owned printed\n%s\nparent %v\nchild %v", out, parent.Resource, child.Resource)
	}
	if _, errOut, code := loomIn(addr, "restore", "foo.v1.Bar", "parent"); code != 1 || !strings.Contains(errOut, "parent is live: to roll it back, give -version") {
		t.Errorf("restore of a live name: exit %d, %s", code, errOut)
	}

	// Rolled back to the first lifetime's creation, with CAS.
	if _, errOut, code := loomIn(addr, "restore", "foo.v1.Bar", "parent", "-version", created, "-expected-version", "1"); code != 1 || !strings.Contains(errOut, "Aborted") {
		t.Errorf("roll-back from a stale version: exit %d, %s", code, errOut)
	}
	out = loomOK(t, addr, "restore", "foo.v1.Bar", "parent", "-version", created)
	rolled, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: parentID})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "foo.v1.Bar/default.default/parent rolled back to version "+created+": now version ") ||
		bazOf(t, rolled.Resource) != "one" || rolled.Resource.Id.Uid != parent.Resource.Id.Uid {
		t.Errorf("roll-back printed %s; stored %v", out, rolled.Resource)
	}

	// A name taken since: the owner comes back, the owned one is named
	// with the reason, and the exit status is 1.
	loomOK(t, addr, "delete", "foo.v1.Bar", "parent")
	waitGone(t, client, "parent", 10*time.Second)
	waitGone(t, client, "child", 10*time.Second)
	if _, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: barResource(t, "child", "squatter")}); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := loomIn(addr, "restore", "foo.v1.Bar", "parent", "-with-owned")
	if code != 1 || !strings.HasPrefix(out, "foo.v1.Bar/default.default/parent restored: uid ") ||
		!regexp.MustCompile(`\nfoo\.v1\.Bar/default\.default/child@\w{26} not restored \(owned, from version \d+\): AlreadyExists: .+\n$`).MatchString(out) ||
		errOut != "loom: 1 owned resource(s) not restored (see above)\n" {
		t.Errorf("restore -with-owned of a taken name: exit %d\n%s%s", code, out, errOut)
	}
}

func TestHistoryCommands(t *testing.T) {
	addr, _, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0")
	testHistoryCommands(t, addr)
}

func TestEtcdHistoryCommands(t *testing.T) {
	endpoint := etcdtest.Start(t)
	addr, _, _ := startServer(t, "-storage", "etcd", "-etcd-endpoints", endpoint, "-etcd-prefix", "/loomtest-history",
		"-grpc-addr", "127.0.0.1:0", "-lease-ttl", "2s", "-node-name", "h", "-examples")
	testHistoryCommands(t, addr)
}

// TestNoHistory checks what the history commands say to a server without
// the history service (Consul's, say), and to one with history off.
func TestNoHistory(t *testing.T) {
	reg := resource.NewRegistry()
	if err := foo.RegisterTypes(reg); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	server.New(server.Config{Backend: inmem.New(), Registry: reg}).Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	withoutService := lis.Addr().String()
	off, _, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0", "-history-versions", "0")
	for _, addr := range []string{withoutService, off} {
		client := pbresource.NewResourceServiceClient(dialServer(t, addr))
		if _, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: barResource(t, "hello", "hi")}); err != nil {
			t.Fatal(err)
		}
		cmds := [][]string{{"history", "foo.v1.Bar", "hello"}, {"diff", "foo.v1.Bar", "hello"}}
		if addr == withoutService {
			cmds = append(cmds, []string{"trash", "foo.v1.Bar"}, []string{"restore", "foo.v1.Bar", "gone"})
		}
		for _, args := range cmds {
			_, errOut, code := loomIn(addr, args...)
			if code != 1 || errOut != "loom: "+errNoHistory.Error()+"\n" {
				t.Errorf("loom %v against %s: exit %d, %q; want exit 1, %q", args, addr, code, errOut, errNoHistory)
			}
		}
	}
}

// TestHistoryPruned checks that the oldest version a pruned history keeps
// is not taken for a creation.
func TestHistoryPruned(t *testing.T) {
	addr, _, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0", "-history-versions", "2")
	client := pbresource.NewResourceServiceClient(dialServer(t, addr))
	for _, baz := range []string{"one", "two", "three", "four"} {
		if _, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: barResource(t, "pruned", baz)}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := loomOK(t, addr, "history", "foo.v1.Bar", "pruned")
		changes := column(t, out, "CHANGE")
		if len(changes) == 2 {
			if changes[1] != "(earliest kept)" || changes[0] == "created" {
				t.Errorf("a pruned history:\n%s", out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the history was not pruned to 2 versions within 10s:\n%s", out)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}

// Patterns of what differs from one run of a session to the next.
var (
	docTimeRE    = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	docVersionRE = regexp.MustCompile(`\b\d{19}\b`)
	docULIDRE    = regexp.MustCompile(`\b[0-9A-HJKMNP-TV-Z]{26}\b`)
	docAgeRE     = regexp.MustCompile(`\b\d+s\b`)
	spacesRE     = regexp.MustCompile(`[ \t]+`)
)

// normalizeSession replaces in a command's output what differs from run
// to run (times, versions, uids and generations, ages, column widths).
func normalizeSession(s string) string {
	s = docTimeRE.ReplaceAllString(s, "TIME")
	s = docVersionRE.ReplaceAllString(s, "VERSION")
	s = docULIDRE.ReplaceAllString(s, "ULID")
	s = docAgeRE.ReplaceAllString(s, "AGE")
	return strings.TrimSpace(spacesRE.ReplaceAllString(s, " "))
}

// TestHistoryDocSession runs the session of docs/cli.md's "History, trash
// and restore" against a -dev server set up as the text says, and compares
// each command's output (stdout, then stderr) with the page's.
func TestHistoryDocSession(t *testing.T) {
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)\n## History, trash and restore\n.*?```console\n(.*?)```").FindSubmatch(page)
	if m == nil {
		t.Fatal("docs/cli.md has no console session under \"History, trash and restore\"")
	}
	addr, _, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0")
	client := pbresource.NewResourceServiceClient(dialServer(t, addr))
	web := strings.NewReplacer("parent", "web", "child", "web-db", "baz: one", "baz: blue", "baz: kid", "baz: postgres")
	loomOK(t, addr, "apply", "-f", writeFile(t, "web.yaml", web.Replace(historyBars)))
	waitObserved(t, client, barResource(t, "web", "x").Id, 10*time.Second)
	waitObserved(t, client, barResource(t, "web-db", "x").Id, 10*time.Second)
	loomOK(t, addr, "apply", "-f", writeFile(t, "web.yaml", strings.Replace(web.Replace(historyBars), "blue", "green", 1)))
	waitObserved(t, client, barResource(t, "web", "x").Id, 10*time.Second)

	versions := map[string]string{} // the page's versions, as this run made them
	steps := strings.Split(strings.TrimPrefix(string(m[1]), "$ "), "\n$ ")
	for _, step := range steps {
		cmd, want, _ := strings.Cut(step, "\n")
		args := strings.Fields(cmd)[1:] // after "loom"
		for i, a := range args {
			if docVersionRE.MatchString(a) {
				if versions[a] == "" {
					t.Fatalf("%s: version %s is in no output before it", cmd, a)
				}
				args[i] = versions[a]
			}
		}
		out, errOut, _ := loomIn(addr, args...)
		if got := out + errOut; normalizeSession(got) != normalizeSession(want) {
			t.Fatalf("$ %s\nprinted\n%s\nthe page says\n%s", cmd, got, want)
		} else if pageV, gotV := docVersionRE.FindAllString(want, -1), docVersionRE.FindAllString(got, -1); len(pageV) == len(gotV) {
			for i, v := range pageV {
				versions[v] = gotV[i]
			}
		}
		if args[0] == "delete" { // the reaper's cascade, before the trash is listed
			waitGone(t, client, "web-db", 10*time.Second)
		}
	}
	if len(steps) < 8 {
		t.Errorf("the session has %d commands; is the page's block whole?", len(steps))
	}
}
