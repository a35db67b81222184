package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"

	"github.com/loomrt/loom/examples/foo"
	pbcatalogv1 "github.com/loomrt/loom/proto/pbcatalog/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/server/catalog"
)

// runBoth runs loom with args and returns its stdout, stderr and error.
func runBoth(args ...string) (string, string, error) {
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), args, &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// TestTypesStatsAndShortNames: loom types and loom stats against a dev
// server, and short, case-insensitive type names in the commands that
// take a type.
func TestTypesStatsAndShortNames(t *testing.T) {
	addr, _, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0")
	bar := filepath.Join(t.TempDir(), "bar.yaml")
	if err := os.WriteFile(bar, []byte(oneBar), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runBoth("apply", "-addr", addr, "-f", bar); err != nil {
		t.Fatal(err)
	}

	out, _, err := runBoth("types", "-addr", addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"NAME        GROUP     VERSION  KIND       SCOPE      MESSAGE                              READ  LIST  WRITE\n",
		"\nfoo.v1.bar  foo       v1       Bar        namespace  loom.example.foo.v1.Bar              yes   yes   yes\n",
		"\nzip         foo       v1       Zip        partition  loom.example.foo.v1.Zip              yes   yes   yes\n",
		"\ntombstone   resource  v1       Tombstone  namespace  hashicorp.consul.resource.Tombstone  yes   yes   yes\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("loom types printed\n%s\nwant a line %q", out, want)
		}
	}

	// foo.Bar has two versions: a name without one is ambiguous.
	for _, name := range []string{"foo.v1.bar", "FOO.V1.BAR", "Foo.v1.Bar", "foo.v1.Bar"} {
		if out, stderr, err := runBoth("list", "-addr", addr, name, "-o", "name"); err != nil || out != "foo.v1.Bar/default.default/a\n" {
			t.Errorf("list %s: %q, %q, %v", name, out, stderr, err)
		}
	}
	if _, _, err := runBoth("list", "-addr", addr, "bar"); err == nil || !strings.Contains(err.Error(), "in several versions (foo.v1.Bar, foo.v2.Bar)") {
		t.Errorf("list bar: %v", err)
	}
	if out, _, err := runBoth("read", "-addr", addr, "foo.v1.bar", "a", "-o", "name"); err != nil || out != "foo.v1.Bar/default.default/a\n" {
		t.Errorf("read foo.v1.bar a: %q, %v", out, err)
	}
	if out, _, err := runBoth("list", "-addr", addr, "-owner", "foo.v1.bar/a", "zip", "-o", "name"); err != nil || out != "" {
		t.Errorf("list -owner foo.v1.bar/a zip: %q, %v", out, err)
	}
	_, _, err = runBoth("list", "-addr", addr, "nosuch")
	if err == nil || !errors.As(err, new(usageError)) || !strings.Contains(err.Error(), `the server has no type "nosuch" (loom types lists them)`) {
		t.Errorf("list nosuch: %v", err)
	}

	out, _, err = runBoth("stats", "-addr", addr, "foo.v2.bar")
	if err != nil || out != "TYPE     RESOURCES  MARKED\nfoo.Bar  1          0\n" {
		t.Errorf("stats bar: %q, %v", out, err)
	}
	out, _, err = runBoth("stats", "-addr", addr, "-by-tenancy", "foo.v1.Bar")
	if err != nil || out != "TYPE     PARTITION  NAMESPACE  RESOURCES  MARKED\nfoo.Bar  default    default    1          0\n" {
		t.Errorf("stats -by-tenancy bar: %q, %v", out, err)
	}
}

// TestMatchType: the forms of a type name, and ambiguous names listing
// their candidates.
func TestMatchType(t *testing.T) {
	var types []*pbcatalogv1.TypeInfo
	for _, s := range []string{"foo.v1.Bar", "foo.v2.Bar", "other.v1.Bar", "other.v1.Zip"} {
		parts := strings.Split(s, ".")
		types = append(types, &pbcatalogv1.TypeInfo{Type: &pbresource.Type{Group: parts[0], GroupVersion: parts[1], Kind: parts[2]}})
	}
	for arg, want := range map[string]string{
		"zip": "other.v1.Zip", "ZIP": "other.v1.Zip", "other.zip": "other.v1.Zip", "Other.V1.zip": "other.v1.Zip",
		"foo.v2.bar": "foo.v2.Bar", "other.bar": "other.v1.Bar",
	} {
		got, err := matchType(types, arg)
		if err != nil || resource.TypeString(got) != want {
			t.Errorf("matchType(%q) = %v, %v; want %s", arg, got, err, want)
		}
	}
	for arg, want := range map[string]string{
		"bar":     `type "bar" is ambiguous: it names foo.Bar, other.Bar; give GROUP.KIND`,
		"foo.bar": `type "foo.bar" names foo.Bar in several versions (foo.v1.Bar, foo.v2.Bar), and each lists and reads only what is stored in its own: give GROUP.VERSION.KIND`,
		"qux":     `the server has no type "qux" (loom types lists them)`,
	} {
		if _, err := matchType(types, arg); err == nil || !errors.As(err, new(usageError)) || err.Error() != want {
			t.Errorf("matchType(%q): %v, want %s", arg, err, want)
		}
	}
	for typ, want := range map[string]string{"foo.v1.Bar": "foo.v1.bar", "other.v1.Bar": "other.bar", "other.v1.Zip": "zip"} {
		parsed, _ := resource.ParseType(typ)
		if got := shortName(types, parsed); got != want {
			t.Errorf("shortName(%s) = %s, want %s", typ, got, want)
		}
	}
}

// startCatalogServer serves a ResourceService with the foo types on a
// loopback port, and the catalog service when withCatalog; it counts the
// ListTypes calls.
func startCatalogServer(t *testing.T, withCatalog bool) (addr string, listTypes *atomic.Int64) {
	t.Helper()
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	listTypes = new(atomic.Int64)
	gs := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if info.FullMethod == pbcatalogv1.CatalogService_ListTypes_FullMethodName {
			listTypes.Add(1)
		}
		return handler(ctx, req)
	}))
	svc.Server.Register(gs)
	if withCatalog {
		catalog.New(svc.Server).Register(gs)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String(), listTypes
}

// TestOneListTypesPerCommand: a command resolving several short names asks
// for the types once.
func TestOneListTypesPerCommand(t *testing.T) {
	addr, listTypes := startCatalogServer(t, true)
	if _, stderr, err := runBoth("list", "-addr", addr, "-owner", "qux/a@01J0000000000000000000000A", "zip"); err != nil {
		t.Fatalf("list -owner qux/a zip: %v\n%s", err, stderr)
	}
	if n := listTypes.Load(); n != 1 {
		t.Errorf("ListTypes called %d times, want 1", n)
	}
	if _, _, err := runBoth("list", "-addr", addr, "foo.v1.Bar"); err != nil {
		t.Fatal(err)
	}
	if n := listTypes.Load(); n != 1 {
		t.Errorf("a full name asked for the types: %d calls, want 1", n)
	}
}

// TestShortNamesWithoutCatalog: against a server without the catalog
// (Consul's), full names work and short ones fail with a usage error,
// the note said once.
func TestShortNamesWithoutCatalog(t *testing.T) {
	addr, _ := startCatalogServer(t, false)
	if _, stderr, err := runBoth("list", "-addr", addr, "foo.v1.Bar"); err != nil || stderr != "No resources found.\n" {
		t.Fatalf("list foo.v1.Bar: %v, stderr %q", err, stderr)
	}
	_, stderr, err := runBoth("list", "-addr", addr, "-owner", "foo.v1.Bar/a", "bar")
	if err == nil || !errors.As(err, new(usageError)) || err.Error() != `type "bar" is not of the form group.version.kind, which this server needs` {
		t.Errorf("list bar: %v", err)
	}
	const note = "loom: note: the server lists no types (no loom.catalog.v1, e.g. a Consul server): give types in full, as group.version.kind\n"
	if stderr != note {
		t.Errorf("list bar printed on stderr %q, want %q", stderr, note)
	}
	_, _, err = runBoth("types", "-addr", addr)
	if err == nil || !strings.Contains(err.Error(), "the server does not serve loom.catalog.v1") {
		t.Errorf("types: %v", err)
	}
}

// TestTypesWithAReadOnlyToken: loom types shows what the token may do.
func TestTypesWithAReadOnlyToken(t *testing.T) {
	aclFile := filepath.Join(t.TempDir(), "acl.yaml")
	if err := os.WriteFile(aclFile, []byte(`tokens:
  - name: viewer
    secret: viewer-secret
    rules:
      - {type: "foo.*.*", partition: "*", namespace: "*", access: list}
      - {type: "foo.*.*", partition: "*", namespace: "*", access: read}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0", "-acl-file", aclFile)
	out, _, err := runBoth("types", "-addr", addr, "-token", "viewer-secret")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nzip         foo       v1       Zip        partition  loom.example.foo.v1.Zip              yes   yes   no\n",
		"\ntombstone   resource  v1       Tombstone  namespace  hashicorp.consul.resource.Tombstone  no    no    no\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("loom types with a viewer's token printed\n%s\nwant a line %q", out, want)
		}
	}
}
