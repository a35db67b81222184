package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
)

const barJSON = `{
  "resource": {
    "id": {
      "type": {"group": "foo", "group_version": "v1", "kind": "Bar"},
      "tenancy": {"partition": "default", "namespace": "default"},
      "name": "cli"
    },
    "data": {
      "@type": "type.googleapis.com/loom.example.foo.v1.Bar",
      "baz": "Hello CLI"
    }
  }
}`

func runCLI(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, &stdout, &stderr)
	return stdout.String(), err
}

func TestClientCommands(t *testing.T) {
	addr, _, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0")
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "bar.json")
	if err := os.WriteFile(file, []byte(barJSON), 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := runCLI(t, ctx, "write", "-addr", addr, file)
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	if !strings.Contains(out, `"hello cli"`) || !strings.Contains(out, `"version"`) {
		t.Errorf("write printed %s, want the stored resource with baz lower-cased", out)
	}

	out, err = runCLI(t, ctx, "read", "-addr", addr, "-consistent", "-o", "json", "foo.v1.Bar", "cli")
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if !strings.Contains(out, `"hello cli"`) {
		t.Errorf("read printed %s", out)
	}

	out, err = runCLI(t, ctx, "list", "-addr", addr, "-namespace", "*", "-o", "json", "foo.v1.Bar")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if !strings.Contains(out, `"name": "cli"`) {
		t.Errorf("list printed %s", out)
	}

	// watch prints the snapshot and its end, then runs until cancelled.
	watchCtx, cancel := context.WithCancel(ctx)
	var watchOut testlog.Buffer
	done := make(chan error, 1)
	go func() {
		done <- run(watchCtx, []string{"watch", "-addr", addr, "foo.v1.Bar"}, &watchOut, &bytes.Buffer{})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(watchOut.String(), "endOfSnapshot") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("watch returned %v after interrupt, want nil", err)
	}
	lines := strings.Split(strings.TrimSpace(watchOut.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"upsert"`) || !strings.Contains(lines[1], "endOfSnapshot") {
		t.Errorf("watch printed %q, want an upsert line then an endOfSnapshot line", lines)
	}

	if _, err := runCLI(t, ctx, "delete", "-addr", addr, "foo.v1.Bar", "cli"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	// The example controller may have added its finalizer: the deletion
	// then completes once it has removed it.
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, err := runCLI(t, ctx, "read", "-addr", addr, "foo.v1.Bar", "cli")
		if status.Code(err) == codes.NotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("read 10 s after delete: %v, want NotFound", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClientUsage(t *testing.T) {
	cases := [][]string{
		{"read", "foo.v1.Bar"},
		{"read", "not-a-type", "x"},
		{"list"},
		{"write"},
		{"delete", "foo.v1.Bar"},
		{"watch", "a", "b"},
	}
	for _, args := range cases {
		_, err := runCLI(t, context.Background(), args...)
		var u usageError
		if !asUsage(err, &u) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

func TestParseDocuments(t *testing.T) {
	types := &typeResolver{ctx: context.Background(), noServer: errors.New("no server in this test")}
	docs, err := parseDocuments("bar.json", []byte(barJSON), types)
	if err != nil || len(docs) != 1 || docs[0].res.GetId().GetName() != "cli" {
		t.Fatalf("WriteRequest form: %v %v", docs, err)
	}
	bare := `{"id": {"type": "foo.v1.Bar", "name": "x"},
	          "data": {"@type": "type.googleapis.com/loom.example.foo.v1.Bar", "baz": "b"}}`
	docs, err = parseDocuments("bare.json", []byte(bare), types)
	if err != nil || docs[0].res.GetId().GetName() != "x" || docs[0].res.GetId().GetType().GetKind() != "Bar" {
		t.Fatalf("Resource form with a type string: %v %v", docs, err)
	}
	_, err = parseDocuments("bad.yaml", []byte("id: {type: foo.v1.Bar, name: a}\ndata: {'@type': type.googleapis.com/loom.example.foo.v1.Bar}\n---\nnope: 1\n"), types)
	if err == nil || !strings.Contains(err.Error(), "bad.yaml: document 2") {
		t.Errorf("garbage in document 2: got %v, want an error naming bad.yaml: document 2", err)
	}
	_, err = parseDocuments("untyped.yaml", []byte("id: {type: foo.v1.Bar, name: a}\ndata: {baz: hello}\n"), types)
	if err == nil || !strings.Contains(err.Error(), `untyped.yaml: document 1: data: missing "@type"`) {
		t.Errorf("data without @type: got %v, want an error saying data lacks @type", err)
	}
}

func asUsage(err error, u *usageError) bool { return errors.As(err, u) }

func TestExitCodeFormatsServerErrors(t *testing.T) {
	var stderr bytes.Buffer
	code := exitCode(status.Error(codes.NotFound, "resource foo.v1.Bar/default.default/x does not exist"), &stderr)
	if code != 1 || stderr.String() != "loom: NotFound: resource foo.v1.Bar/default.default/x does not exist\n" {
		t.Errorf("exit code %d, stderr %q", code, stderr.String())
	}
}

// A tombstone's data is a type of Loom's own registry: the CLI prints it as
// JSON and reads it back.
func TestTombstoneJSON(t *testing.T) {
	owner := &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: "b", Uid: "u"}
	data, err := anypb.New(&pbresource.Tombstone{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	res := &pbresource.Resource{Id: &pbresource.ID{Type: foo.BarV1Type, Name: "t"}, Data: data}
	types := &typeResolver{ctx: context.Background(), noServer: errors.New("no server in this test")}
	var out, stderr bytes.Buffer
	p := &printer{format: formatJSON, types: types, stdout: &out, stderr: &stderr, now: time.Now, warned: map[string]bool{}}
	if err := p.printResources([]*pbresource.Resource{res}, true); err != nil {
		t.Fatalf("printing a tombstone: %v", err)
	}
	if !strings.Contains(out.String(), `"@type": "type.googleapis.com/hashicorp.consul.resource.Tombstone"`) {
		t.Errorf("printed %s, want the tombstone's data as JSON", out.String())
	}
	back, err := parseDocuments("out.json", out.Bytes(), types)
	if err != nil {
		t.Fatalf("reading back %s: %v", out.String(), err)
	}
	if !proto.Equal(back[0].res, res) {
		t.Errorf("read back %v, want %v", back[0].res, res)
	}
}
