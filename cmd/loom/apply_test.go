package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/stretchr/testify/require"
)

// These tests run apply in the test process against the in-memory
// service, through a client that counts the writes and, optionally,
// behaves as Consul's does on a Write.

// countingClient counts Writes; with consulWrites it gives every Write
// that changes nothing a new version and generation, as Consul does
// (Consul bumps the generation on any Write).
type countingClient struct {
	pbresource.ResourceServiceClient
	consulWrites bool
	writes       atomic.Int32
}

func (c *countingClient) Write(ctx context.Context, in *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	c.writes.Add(1)
	if !c.consulWrites {
		return c.ResourceServiceClient.Write(ctx, in, opts...)
	}
	id := in.GetResource().GetId()
	before, _ := c.ResourceServiceClient.Read(ctx, &pbresource.ReadRequest{Id: &pbresource.ID{Type: id.GetType(), Tenancy: id.GetTenancy(), Name: id.GetName()}})
	resp, err := c.ResourceServiceClient.Write(ctx, in, opts...)
	if err != nil || resp.Resource.Version != before.GetResource().GetVersion() {
		return resp, err
	}
	// Loom changed nothing; Consul would have written a new version.
	v, _ := strconv.Atoi(resp.Resource.Version)
	resp.Resource.Version = strconv.Itoa(v + 1000)
	resp.Resource.Generation = "consul-bumped"
	return resp, nil
}

// applyTester applies YAML through one client.
type applyTester struct {
	t      *testing.T
	svc    *resourcetest.Service
	client *countingClient
	bulk   pbbulkv1.BulkServiceClient // nil: none
}

func newApplyTester(t *testing.T, consulWrites bool) *applyTester {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	return &applyTester{t: t, svc: svc, client: &countingClient{ResourceServiceClient: svc.Client, consulWrites: consulWrites}}
}

// apply applies the YAML documents and returns what it printed, and how
// many Writes it made.
func (a *applyTester) apply(yaml string) (string, int32, error) {
	a.t.Helper()
	types := &typeResolver{ctx: context.Background(), noServer: errors.New("no reflection in this test")}
	docs, err := parseDocuments("test.yaml", []byte(yaml), types)
	if err != nil {
		a.t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	s := &session{client: a.client, bulk: a.bulk, types: types, stderr: &stderr}
	before := a.client.writes.Load()
	err = applyDocuments(context.Background(), s, docs, false, "", &stdout)
	return stdout.String(), a.client.writes.Load() - before, err
}

func (a *applyTester) exists(typ *pbresource.Type, name string) bool {
	a.t.Helper()
	_, err := a.svc.Client.Read(context.Background(), &pbresource.ReadRequest{Id: &pbresource.ID{Type: typ, Name: name}})
	if err != nil && status.Code(err) != codes.NotFound {
		a.t.Fatal(err)
	}
	return err == nil
}

func bar(name, baz string, more ...string) string {
	return "id: {type: foo.v1.Bar, name: " + name + "}\n" + strings.Join(more, "\n") +
		"\ndata: {'@type': type.googleapis.com/loom.example.foo.v1.Bar, baz: " + baz + "}\n---\n"
}

func zip(name string, more ...string) string {
	return "id: {type: foo.v1.Zip, name: " + name + "}\n" + strings.Join(more, "\n") +
		"\ndata: {'@type': type.googleapis.com/loom.example.foo.v1.Zip, zap: z}\n---\n"
}

func ownedBy(kind, name string) string {
	return "owner: {type: foo.v1." + kind + ", name: " + name + "}"
}

// A file none of whose documents the server would refuse alone, but one of
// which names an owner that does not exist, writes nothing.
func TestApplyChecksOwnersBeforeTheFirstWrite(t *testing.T) {
	old := resource.NewULID() // a uid nothing has
	for name, tc := range map[string]struct{ file, want string }{
		"absent owner": {bar("first", "a") + bar("second", "b", ownedBy("Zip", "nobody")),
			"test.yaml: document 2: owner foo.v1.Zip/default./nobody: does not exist, and the files do not create it: nothing was written"},
		"stale owner uid": {bar("first", "a") + bar("second", "b", "owner: {type: foo.v1.Zip, name: kept, uid: "+old+"}"),
			"test.yaml: document 2: owner foo.v1.Zip/default./kept: uid " + old + " is not the stored owner's"},
		"a uid for an owner the files create": {zip("new") + bar("second", "b", "owner: {type: foo.v1.Zip, name: new, uid: "+old+"}"),
			"test.yaml: document 2: owner foo.v1.Zip/default./new: test.yaml: document 1 creates it, with a new uid: leave owner.uid out"},
		"new owners owning each other": {bar("first", "a") + zip("new", ownedBy("Zip", "ring")) + zip("ring", ownedBy("Zip", "new")),
			"test.yaml: document 2: its owners, created by the same files, own it in turn"},
		"another owner than the stored one": {bar("first", "a") + bar("child", "c", ownedBy("Zip", "new")) + zip("new"),
			"test.yaml: document 2: owner is immutable: the stored resource is owned by foo.v1.Zip/default./kept: nothing was written"},
		"a stale version": {bar("first", "a") + zip("kept", "version: '999999'"),
			"test.yaml: document 2: version 999999 is not the stored resource's"},
		"a version of what does not exist": {bar("first", "a") + zip("new", "version: '1'"),
			"test.yaml: document 2: version 1 is given, but the resource does not exist"},
		"a stale uid": {bar("first", "a") + "id: {type: foo.v1.Zip, name: kept, uid: " + old + "}\ndata: {'@type': type.googleapis.com/loom.example.foo.v1.Zip}\n",
			"test.yaml: document 2: id.uid " + old + " is not the stored resource's"},
	} {
		t.Run(name, func(t *testing.T) {
			a := newApplyTester(t, false)
			if _, _, err := a.apply(zip("kept") + bar("child", "c", ownedBy("Zip", "kept"))); err != nil {
				t.Fatal(err)
			}
			out, writes, err := a.apply(tc.file)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("apply: %v, want an error containing %q", err, tc.want)
			}
			if writes != 0 || out != "" || a.exists(foo.BarV1Type, "first") {
				t.Errorf("apply made %d writes and printed %q; want none", writes, out)
			}
		})
	}
}

// Owners the files create are written before what they own, wherever they
// are in the files; a re-apply changes nothing.
func TestApplyWritesOwnersFirst(t *testing.T) {
	a := newApplyTester(t, false)
	file := bar("child", "c", ownedBy("Zip", "parent")) + zip("parent", ownedBy("Zip", "root")) + zip("root")
	out, _, err := a.apply(file)
	want := "foo.v1.Zip/default./root created\n" +
		"foo.v1.Zip/default./parent created\n" +
		"foo.v1.Bar/default.default/child created\n"
	if err != nil || out != want {
		t.Fatalf("apply: %v, printed\n%s\nwant\n%s", err, out, want)
	}
	out, writes, err := a.apply(file)
	if err != nil || writes != 0 || strings.Count(out, " unchanged\n") != 3 {
		t.Errorf("re-apply: %v, %d writes, printed\n%s\nwant 3 unchanged and no write", err, writes, out)
	}
}

// Against Consul, which gives every Write a new generation, a re-apply of
// an unchanged file must write nothing: apply compares with what is stored.
func TestApplyUnchangedWritesNothingOnConsul(t *testing.T) {
	a := newApplyTester(t, true)
	// Upper case, which the Mutate hook lowers: the comparison is with the
	// resource as the server would store it.
	file := zip("owner") + bar("owned", "Hello", ownedBy("Zip", "owner"), "metadata: {team: blue}")
	if _, _, err := a.apply(file); err != nil {
		t.Fatal(err)
	}
	// A controller adds its finalizer, which apply keeps.
	id := &pbresource.ID{Type: foo.BarV1Type, Name: "owned"}
	read, err := a.svc.Client.Read(context.Background(), &pbresource.ReadRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	read.Resource.Metadata["finalizers"] = "ctrl/cleanup"
	if _, err := a.svc.Client.Write(context.Background(), &pbresource.WriteRequest{Resource: read.Resource}); err != nil {
		t.Fatal(err)
	}

	out, writes, err := a.apply(file)
	want := "foo.v1.Zip/default./owner unchanged\nfoo.v1.Bar/default.default/owned unchanged\n"
	if err != nil || out != want || writes != 0 {
		t.Errorf("re-apply: %v, %d writes, printed\n%s\nwant no write and\n%s", err, writes, out, want)
	}

	out, writes, err = a.apply(strings.Replace(file, "team: blue", "team: red", 1))
	if err != nil || writes != 1 || !strings.Contains(out, "owned updated\n") || !strings.Contains(out, "owner unchanged\n") {
		t.Errorf("apply of a change: %v, %d writes, printed\n%s\nwant one write, of the changed Bar", err, writes, out)
	}
	got, err := a.svc.Client.Read(context.Background(), &pbresource.ReadRequest{Id: id})
	if err != nil || got.Resource.Metadata["finalizers"] != "ctrl/cleanup" || got.Resource.Metadata["team"] != "red" {
		t.Errorf("after the change: %v, metadata %v; want the controller's finalizer kept", err, got.GetResource().GetMetadata())
	}
}

// Data encoded differently (fields in another order) but equal is the same.
func TestSameDataDecodes(t *testing.T) {
	types := &typeResolver{ctx: context.Background(), noServer: errors.New("no reflection in this test")}
	canonical, err := anypb.New(&pbfoov1.Bar{Baz: "b", Qux: &pbresource.ID{Name: "q"}})
	if err != nil {
		t.Fatal(err)
	}
	qux := protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "q") // ID.name
	var reordered []byte
	reordered = protowire.AppendBytes(protowire.AppendTag(reordered, 2, protowire.BytesType), qux)
	reordered = protowire.AppendString(protowire.AppendTag(reordered, 1, protowire.BytesType), "b")
	other := &anypb.Any{TypeUrl: canonical.TypeUrl, Value: reordered}
	if bytes.Equal(other.Value, canonical.Value) {
		t.Fatal("the test's encodings are the same")
	}
	if !sameData(canonical, other, types) {
		t.Error("equal data in another field order is not the same")
	}
	changed, _ := anypb.New(&pbfoov1.Bar{Baz: "c", Qux: &pbresource.ID{Name: "q"}})
	if sameData(canonical, changed, types) {
		t.Error("different data is the same")
	}
}

// Many documents go to a Loom server in one bulk import (no Write), and
// one Write at a time to a server without the bulk service; both print
// the same.
func TestApplyBulkPath(t *testing.T) {
	var file strings.Builder
	var want strings.Builder
	for i := range bulkApplyMin {
		name := fmt.Sprintf("z%02d", i)
		file.WriteString("id: {type: foo.v1.Zip, name: " + name + ", tenancy: {partition: default}}\n" +
			"data: {'@type': type.googleapis.com/loom.example.foo.v1.Zip, zap: z}\n---\n")
		fmt.Fprintf(&want, "foo.v1.Zip/default./%s %%s\n", name)
	}
	for _, withBulk := range []bool{true, false} {
		t.Run(fmt.Sprintf("bulk=%v", withBulk), func(t *testing.T) {
			svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes), resourcetest.OverGRPC())
			a := &applyTester{t: t, svc: svc, client: &countingClient{ResourceServiceClient: svc.Client}, bulk: svc.Bulk}
			wantWrites := int32(0)
			if !withBulk {
				a.bulk = withoutBulk(t, svc)
				wantWrites = bulkApplyMin
			}
			out, writes, err := a.apply(file.String())
			require.NoError(t, err)
			require.Equal(t, strings.ReplaceAll(want.String(), "%s", "created"), out)
			require.Equal(t, wantWrites, writes)
			out, writes, err = a.apply(file.String())
			require.NoError(t, err)
			require.Equal(t, strings.ReplaceAll(want.String(), "%s", "unchanged"), out)
			require.Zero(t, writes)
		})
	}
}

// withoutBulk returns a bulk client of a gRPC server that serves svc's
// ResourceService only, as Consul does: every call is Unimplemented.
func withoutBulk(t *testing.T, svc *resourcetest.Service) pbbulkv1.BulkServiceClient {
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	svc.Server.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(); gs.Stop() })
	return pbbulkv1.NewBulkServiceClient(conn)
}
