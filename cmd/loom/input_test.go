package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The commands that read files refuse input over their limits before
// they read it whole, and before they send anything: these run with no
// server (nothing listens on the address).

// runNoServer runs loom with args and standard input in, and fails the
// test if it has not returned within 20 s (an input read whole never
// ends).
func runNoServer(t *testing.T, in io.Reader, args ...string) error {
	t.Helper()
	old := stdin
	stdin = in
	defer func() { stdin = old }()
	done := make(chan error, 1)
	go func() {
		done <- run(context.Background(), append(args, "-addr", "127.0.0.1:1"), io.Discard, io.Discard)
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("loom %v still reading after 20s", args)
		return nil
	}
}

// endless is a YAML stream that never ends: head, then body forever. It
// counts what was read.
type endless struct {
	head, body string
	read       atomic.Int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		at := e.read.Load()
		var s string
		if at < int64(len(e.head)) {
			s = e.head[at:]
		} else {
			s = e.body[(at-int64(len(e.head)))%int64(len(e.body)):]
		}
		c := copy(p[n:], s)
		n += c
		e.read.Add(int64(c))
	}
	return n, nil
}

const oneBar = "id: {type: foo.v1.Bar, name: a}\ndata: {'@type': type.googleapis.com/loom.example.foo.v1.Bar, baz: b}\n"

func TestInputOverTheLimitIsRefusedFromItsSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	// 1 GiB, sparse: nothing is written to disk, and reading it whole
	// would take long.
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, cmd := range [][]string{{"apply", "-f", path}, {"delete", "-f", path}, {"write", path}} {
		err := runNoServer(t, nil, cmd...)
		want := path + ": the input is over -max-input-bytes (67108864 bytes, all files together): nothing was sent"
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("loom %v: %v, want %q", cmd, err, want)
		}
	}
	// The limit counts every file: two of 600 bytes are over 1000.
	dir := t.TempDir()
	for _, name := range []string{"a.yaml", "b.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(oneBar+strings.Repeat("#", 600-len(oneBar))), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	err = runNoServer(t, nil, "apply", "-f", dir, "-max-input-bytes", "1000")
	if want := filepath.Join(dir, "b.yaml") + ": the input is over -max-input-bytes (1000 bytes"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("two files over the limit together: %v, want %q", err, want)
	}
}

func TestInputOverTheLimitIsRefusedWhileRead(t *testing.T) {
	// Many small documents, without end.
	in := &endless{body: "---\n" + oneBar}
	err := runNoServer(t, in, "apply", "-f", "-", "-max-input-bytes", "100000")
	if want := "<stdin>: the input is over -max-input-bytes (100000 bytes"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("endless input: %v, want %q", err, want)
	}
	if n := in.read.Load(); n > 100000+4096 {
		t.Errorf("read %d bytes of input limited to 100000", n)
	}
}

func TestDocumentOverTheResourceLimitIsRefused(t *testing.T) {
	// One document that never ends: refused after 16 times
	// -max-resource-bytes, though the input could hold more.
	in := &endless{head: oneBar + "---\nid: {type: foo.v1.Bar, name: big}\nmetadata:\n", body: "  k: vvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\n"}
	err := runNoServer(t, in, "apply", "-f", "-", "-max-resource-bytes", "1024")
	want := "<stdin>: document 2: the document is over 16384 bytes of text (16 times -max-resource-bytes), too large for a resource the server stores: nothing was sent"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("an endless document: %v, want %q", err, want)
	}
	if n := in.read.Load(); n > 16384+4096 {
		t.Errorf("read %d bytes for a document limited to 16384", n)
	}

	// A document whose text is within that, but whose resource is not.
	big := strings.Replace(oneBar, "baz: b", "baz: "+strings.Repeat("b", 300), 1)
	err = runNoServer(t, strings.NewReader(oneBar+"---\n"+big), "apply", "-f", "-", "-max-resource-bytes", "300")
	want = "<stdin>: document 2: the resource encodes to 3"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "over -max-resource-bytes (300)") {
		t.Errorf("a resource over -max-resource-bytes: %v, want %q", err, want)
	}

	if err := runNoServer(t, strings.NewReader(oneBar), "apply", "-f", "-", "-max-resource-bytes", "0"); err == nil || !strings.Contains(err.Error(), "must be positive") {
		t.Errorf("-max-resource-bytes 0: %v, want a usage error", err)
	}
}
