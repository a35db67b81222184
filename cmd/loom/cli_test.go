package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The tests of the binary: see cli_helpers_test.go for the server and
// the binary they drive.

const widgetsYAML = `# three widgets
id: {type: clitest.v1.Widget, name: a}
data:
  '@type': type.googleapis.com/loom.clitest.v1.Widget
  color: red
  size: 1
  ttl: 30s
---
id:
  type: {group: clitest, groupVersion: v1, kind: Widget}
  tenancy: {partition: default, namespace: default}
  name: b
metadata:
  finalizers: test/keep
  team: blue
data:
  '@type': type.googleapis.com/loom.clitest.v1.Widget
  color: blue
---
{"id": {"type": "clitest.v1.Widget", "name": "c"},
 "data": {"@type": "type.googleapis.com/loom.clitest.v1.Widget", "color": "green", "size": 3}}
`

func TestCLIAgainstServer(t *testing.T) {
	addr := startWidgetServer(t)
	c := newCLI(t, addr)
	file := writeFile(t, "widgets.yaml", widgetsYAML)

	out := c.ok("apply", "-f", file)
	want := "clitest.v1.Widget/default.default/a created\n" +
		"clitest.v1.Widget/default.default/b created\n" +
		"clitest.v1.Widget/default.default/c created\n"
	if out != want {
		t.Errorf("first apply printed\n%s\nwant\n%s", out, want)
	}

	// Nothing of a file with a bad document is written.
	for _, bad := range []struct{ doc, want string }{
		{"id: {type: clitest.v1.Widget, name: a}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, colour: red}\n", "unknown field"},
		{"id: {type: clitest.v1.Widget, name: a}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, size: -1}\n", "InvalidArgument"},
		{"id: {type: clitest.v1.Widget, name: a}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Nope}\n", "loom.clitest.v1.Nope cannot be resolved"},
	} {
		path := writeFile(t, "bad.yaml", "id: {type: clitest.v1.Widget, name: d}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, color: pink}\n---\n"+bad.doc)
		out, errOut, code := c.run("apply", "-f", path)
		if code != 1 || out != "" || !strings.Contains(errOut, path+": document 2") || !strings.Contains(errOut, bad.want) {
			t.Errorf("apply of a bad file: exit %d, stdout %q, stderr %q; want exit 1, nothing written, an error naming document 2 and %q", code, out, errOut, bad.want)
		}
	}
	if out := c.ok("list", "clitest.v1.Widget", "-o", "name"); strings.Contains(out, "/d\n") {
		t.Errorf("a rejected file's valid document was written: %s", out)
	}

	// A re-apply changes nothing, and keeps what a controller added: a
	// finalizer and a status.
	actAsController(t, addr, "a")
	out = c.ok("apply", "-f", file)
	want = strings.ReplaceAll(want, "created", "unchanged")
	if out != want {
		t.Errorf("re-apply printed\n%s\nwant\n%s", out, want)
	}
	if out := c.ok("read", "clitest.v1.Widget", "a"); !strings.Contains(out, "finalizers: ctrl/cleanup") ||
		!strings.Contains(out, "type: Ready") {
		t.Errorf("apply dropped the finalizer or the status a controller added:\n%s", out)
	}
	if out := c.ok("list", "clitest.v1.Widget", "-prefix", "a"); !regexp.MustCompile(`(?m)^a\s.*\sctrl: Ready=True$`).MatchString(out) {
		t.Errorf("the table has no status summary:\n%s", out)
	}
	// A directory, and standard input.
	if out := c.ok("apply", "-f", filepath.Dir(file)); out != want {
		t.Errorf("apply -f DIR printed\n%s\nwant\n%s", out, want)
	}
	stdinCmd := c.command(context.Background(), "apply", "-f", "-", "-o", "name")
	stdinCmd.Stdin = strings.NewReader(widgetsYAML)
	if out, err := stdinCmd.Output(); err != nil || string(out) != strings.ReplaceAll(want, " unchanged", "") {
		t.Errorf("apply -f - -o name: %v, printed\n%s", err, out)
	}
	if out := c.ok("apply", "-f", file, "-dry-run"); !strings.Contains(out, "a valid (dry run)") {
		t.Errorf("dry run printed %q", out)
	}

	out = c.ok("list", "clitest.v1.Widget")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^NAME\s+TENANCY\s+AGE\s+VERSION\s+STATUS$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^b\s+default\.default\s+\d+s\s+\d+\s+-$`).MatchString(lines[2]) {
		t.Errorf("list -o table printed\n%s", out)
	}
	// Pages of 2: the same three, all of them (their ages may have moved
	// on by a second meanwhile).
	if paged := c.ok("list", "clitest.v1.Widget", "-page-size", "2"); withoutAges(paged) != withoutAges(out) {
		t.Errorf("list -page-size 2 printed\n%s\nwant what list printed\n%s", paged, out)
	}
	// Flags after the arguments, as kubectl takes them; an empty list.
	out, errOut, code := c.run("list", "clitest.v1.Widget", "-prefix", "zzz")
	if code != 0 || out != "" || errOut != "No resources found.\n" {
		t.Errorf("empty list: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out := c.ok("list", "clitest.v1.Widget", "-prefix", "zzz", "-o", "json"); out != "[]\n" {
		t.Errorf("empty list -o json printed %q, want []", out)
	}

	out = c.ok("read", "clitest.v1.Widget", "a", "-o", "yaml")
	for _, s := range []string{"name: a\n", "'@type': type.googleapis.com/loom.clitest.v1.Widget\n", "color: red\n", "size: 1\n", "ttl: 30s\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("read -o yaml printed\n%s\nwithout %q", out, s)
		}
	}

	// watch prints the snapshot, its end, then the changes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := c.command(ctx, "watch", "clitest.v1.Widget", "-o", "json")
	pipe, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	events := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			events <- sc.Text()
		}
		close(events)
	}()
	waitFor := func(what string, match func(string) bool) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for {
			select {
			case line, ok := <-events:
				if !ok {
					t.Fatalf("watch ended before %s", what)
				}
				if match(line) {
					return
				}
			case <-timeout:
				t.Fatalf("no %s within 20s", what)
			}
		}
	}
	eos := regexp.MustCompile(`^\{"endOfSnapshot":\{"version":"(\d+)"\}\}$`)
	var since string
	waitFor("end of snapshot", func(l string) bool {
		if m := eos.FindStringSubmatch(l); m != nil {
			since = m[1]
			return true
		}
		return false
	})
	c.ok("apply", "-f", writeFile(t, "c.yaml", "id: {type: clitest.v1.Widget, name: c}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, color: green, size: 4}\n"))
	waitFor("upsert of c with size 4", func(l string) bool {
		return strings.HasPrefix(l, `{"upsert":`) && strings.Contains(l, `"size":4`)
	})

	// -since the snapshot's version: only the change after it, no
	// snapshot; in a table too, with its header.
	out, errOut, code = c.run("watch", "clitest.v1.Widget", "-since", since, "-timeout", "1s")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, `"size":4`) || strings.Contains(out, "endOfSnapshot") {
		t.Errorf("watch -since %s: exit %d\nstdout:\n%s\nstderr:\n%s\nwant the one upsert of c", since, code, out, errOut)
	}
	out, errOut, code = c.run("watch", "clitest.v1.Widget", "-since", since, "-o", "table", "-timeout", "1s")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "EVENT ") ||
		!regexp.MustCompile(`^UPSERT\s+c\s`).MatchString(lines[1]) || errOut != "" {
		t.Errorf("watch -since %s -o table: exit %d\nstdout:\n%s\nstderr:\n%s", since, code, out, errOut)
	}
	// A version the store has not reached: the server's OutOfRange.
	if _, errOut, code := c.run("watch", "clitest.v1.Widget", "-since", "18446744073709551615", "-timeout", "5s"); code != 1 || !strings.Contains(errOut, "OutOfRange") {
		t.Errorf("watch -since from the future: exit %d, stderr %q; want 1 and OutOfRange", code, errOut)
	}

	// -timeout ends a watch, with exit status 0.
	out, errOut, code = c.run("watch", "clitest.v1.Widget", "-o", "table", "-timeout", "1s")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 || !regexp.MustCompile(`^EVENT\s+NAME\s+TENANCY\s+AGE\s+VERSION\s+STATUS$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`(?m)^UPSERT\s+c\s+default\.default\s+\d+s\s+\d+\s+-$`).MatchString(out) || !strings.Contains(errOut, "end of snapshot") {
		t.Errorf("watch -o table -timeout 1s: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	out = c.ok("delete", "-f", file)
	if !strings.Contains(out, "clitest.v1.Widget/default.default/a marked for deletion (waiting for finalizers: ctrl/cleanup)\n") ||
		!strings.Contains(out, "clitest.v1.Widget/default.default/b marked for deletion (waiting for finalizers: test/keep)\n") ||
		!strings.Contains(out, "clitest.v1.Widget/default.default/c deleted\n") {
		t.Errorf("delete -f printed\n%s", out)
	}
	waitFor("delete of c", func(l string) bool { return strings.HasPrefix(l, `{"delete":`) && strings.Contains(l, `"name":"c"`) })
	if out := c.ok("delete", "clitest.v1.Widget", "c"); out != "clitest.v1.Widget/c not found\n" {
		t.Errorf("delete of a missing resource printed %q", out)
	}
	// An owner and what it owns, in one file: list -owner finds the
	// owned ones, in one reply or in pages of one, and a re-apply leaves
	// all unchanged.
	owned := writeFile(t, "owned.yaml", `id: {type: clitest.v1.Widget, name: p}
data: {'@type': type.googleapis.com/loom.clitest.v1.Widget}
---
id: {type: clitest.v1.Widget, name: k}
owner: {type: clitest.v1.Widget, name: p, tenancy: {partition: default, namespace: default}}
data: {'@type': type.googleapis.com/loom.clitest.v1.Widget}
---
id: {type: clitest.v1.Widget, name: k2}
owner: {type: clitest.v1.Widget, name: p, tenancy: {partition: default, namespace: default}}
data: {'@type': type.googleapis.com/loom.clitest.v1.Widget}
`)
	c.ok("apply", "-f", owned)
	if out := c.ok("apply", "-f", owned); strings.Count(out, " unchanged\n") != 3 {
		t.Errorf("re-apply of an owner and what it owns printed %q", out)
	}
	for _, owner := range []string{"clitest.v1.Widget/p", "clitest.v1.Widget/default.default/p"} {
		for _, size := range []string{"0", "1"} {
			if out := c.ok("list", "-owner", owner, "-page-size", size, "-o", "name"); out != "clitest.v1.Widget/default.default/k\nclitest.v1.Widget/default.default/k2\n" {
				t.Errorf("list -owner %s -page-size %s printed %q", owner, size, out)
			}
		}
	}

	_ = watch.Process.Signal(os.Interrupt)
	if err := watch.Wait(); err != nil {
		t.Errorf("watch after an interrupt: %v, want exit 0", err)
	}
}

func TestCLIUsage(t *testing.T) {
	c := newCLI(t, "127.0.0.1:1")
	for _, args := range [][]string{
		{"list"}, {"list", "-bogus", "x.v1.Y"}, {"read", "x.v1.Y"}, {"apply"}, {"apply", "x.yaml"},
		{"list", "x.v1.Y", "-o", "xml"}, {"delete", "x.v1.Y", "n", "-f", "f.yaml"}, {"nope"},
		{"list", "x.v1.Y", "-page-size", "10001"}, {"list", "-owner", "x.v1.Y/n", "-page-size", "10001"},
	} {
		if _, errOut, code := c.run(args...); code != 2 {
			t.Errorf("loom %v: exit %d (%s), want 2", args, code, errOut)
		}
	}
	for _, cmd := range []string{"apply", "read", "list", "delete", "watch", "write", "version", "server", "leader"} {
		out, errOut, code := c.run("help", cmd)
		if code != 0 || !strings.Contains(out+errOut, "Examples:\n  loom "+cmd) {
			t.Errorf("loom help %s: exit %d, no example:\n%s%s", cmd, code, out, errOut)
		}
	}
	if out, _, code := c.run("help", "watch"); code != 0 || !strings.Contains(out, "stop watching after this long") {
		t.Errorf("loom help watch does not say what -timeout does:\n%s", out)
	}
	// No server: the connection is refused, exit 1.
	if _, errOut, code := c.run("list", "xx.v1.Yy", "-timeout", "2s"); code != 1 || !strings.Contains(errOut, "Unavailable") {
		t.Errorf("list without a server: exit %d, %q; want 1 and Unavailable", code, errOut)
	}
}

// Without reflection, a type comes from -protoset; without either, data is
// printed as base64, and writing it fails naming the type and both ways out.
func TestCLIWithoutReflection(t *testing.T) {
	addr := startWidgetServer(t, "-reflection=false")
	c := newCLI(t, addr)
	doc := "id: {type: clitest.v1.Widget, name: w}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, color: red}\n"
	file := writeFile(t, "w.yaml", doc)

	_, errOut, code := c.run("apply", "-f", file)
	if code != 1 || !strings.Contains(errOut, "loom.clitest.v1.Widget cannot be resolved") ||
		!strings.Contains(errOut, "-reflection") || !strings.Contains(errOut, "-protoset") {
		t.Errorf("apply without reflection: exit %d, stderr %q", code, errOut)
	}

	set := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{
		protodesc.ToFileDescriptorProto(widget(t).ParentFile().Imports().Get(0).FileDescriptor),
		widgetFile,
	}}
	b, err := proto.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	protoset := writeFile(t, "widget.protoset", string(b))
	if out := c.ok("apply", "-f", file, "-protoset", protoset); out != "clitest.v1.Widget/default.default/w created\n" {
		t.Errorf("apply -protoset printed %q", out)
	}
	if out := c.ok("read", "clitest.v1.Widget", "w", "-protoset", protoset); !strings.Contains(out, "color: red") {
		t.Errorf("read -protoset printed\n%s", out)
	}
	out, errOut, code := c.run("read", "clitest.v1.Widget", "w", "-o", "json")
	if code != 0 || !strings.Contains(out, `"@value": "CgNyZWQ="`) || !strings.Contains(errOut, "warning: data printed as base64") {
		t.Errorf("read of an unresolvable type: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// TestCLIWithTLSAndToken drives the CLI against a server with mutual TLS and
// an ACL file, the token given by -token or $LOOM_TOKEN.
func TestCLIWithTLSAndToken(t *testing.T) {
	caFile, certFile, keyFile, _ := testPKI(t)
	aclFile := writeFile(t, "acl.yaml", `tokens:
  - name: writer
    secret: "writer-secret"
    rules:
      - {type: "clitest.*.*", partition: "*", namespace: "*", access: write}
      - {capability: reflection}
  - name: reader
    secret: "reader-secret"
    rules:
      - {type: "clitest.*.*", partition: "*", namespace: "*", access: read}
      - {capability: reflection}
`)
	addr := startWidgetServer(t, "-tls-cert", certFile, "-tls-key", keyFile, "-tls-client-ca", caFile, "-acl-file", aclFile)
	tlsFlags := []string{"-tls-ca", caFile, "-tls-cert", certFile, "-tls-key", keyFile}
	file := writeFile(t, "w.yaml", "id: {type: clitest.v1.Widget, name: s}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, color: black}\n")

	c := newCLI(t, addr, "LOOM_TOKEN=writer-secret")
	if out := c.ok(append([]string{"apply", "-f", file}, tlsFlags...)...); out != "clitest.v1.Widget/default.default/s created\n" {
		t.Errorf("apply over TLS with a token printed %q", out)
	}
	// -token wins over $LOOM_TOKEN: the reader may read, not write.
	if out := c.ok(append([]string{"read", "clitest.v1.Widget", "s", "-token", "reader-secret"}, tlsFlags...)...); !strings.Contains(out, "color: black") {
		t.Errorf("read with the reader's token printed\n%s", out)
	}
	_, errOut, code := c.run(append([]string{"delete", "clitest.v1.Widget", "s", "-token", "reader-secret"}, tlsFlags...)...)
	if code != 1 || !strings.HasPrefix(errOut, "loom: PermissionDenied: ") {
		t.Errorf("delete with the reader's token: exit %d, stderr %q; want 1 and the server's PermissionDenied", code, errOut)
	}

	anonymous := newCLI(t, addr)
	_, errOut, code = anonymous.run(append([]string{"list", "clitest.v1.Widget"}, tlsFlags...)...)
	if code != 1 || !strings.HasPrefix(errOut, "loom: Unauthenticated: ") {
		t.Errorf("list without a token: exit %d, stderr %q; want 1 and Unauthenticated", code, errOut)
	}
	// Plaintext to a TLS server fails; so does TLS without the client
	// certificate mutual TLS asks for.
	if _, _, code := c.run("list", "clitest.v1.Widget", "-timeout", "2s"); code != 1 {
		t.Errorf("plaintext list against a TLS server: exit %d, want 1", code)
	}
	if _, _, code := c.run("list", "clitest.v1.Widget", "-timeout", "2s", "-tls-ca", caFile); code != 1 {
		t.Errorf("list without the client certificate: exit %d, want 1", code)
	}
	if _, errOut, code := c.run("list", "clitest.v1.Widget", "-tls-cert", certFile); code != 2 {
		t.Errorf("-tls-cert without -tls-key: exit %d (%s), want 2", code, errOut)
	}
}

// ageColumn matches the third column, AGE, of a list's table.
var ageColumn = regexp.MustCompile(`(?m)^(\S+\s+\S+\s+)\S+`)

// withoutAges returns a list's table with its AGE column blanked.
func withoutAges(table string) string { return ageColumn.ReplaceAllString(table, "${1}-") }
