package bulk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/server/bulk"
)

// The tokens of the tests: admin may write everything and restore;
// writer may write everything but not restore; reader may read and list.
const policy = `tokens:
  - name: admin
    secret: admin-secret
    rules:
      - {type: "*.*.*", partition: "*", namespace: "*", access: write}
      - {capability: restore}
  - name: writer
    secret: writer-secret
    rules:
      - {type: "*.*.*", partition: "*", namespace: "*", access: write}
  - name: team-a
    secret: team-a-secret
    rules:
      - {type: "*.*.*", partition: "*", namespace: "a", access: write}
`

// widgetType's Validate refuses the zap "bad".
var widgetType = &pbresource.Type{Group: "test", GroupVersion: "v1", Kind: "Widget"}

func registerWidget(r resource.Registry) error {
	return resource.Register(r, resource.Registration[*pbfoov1.Zip]{
		Type:  widgetType,
		Scope: resource.ScopeNamespace,
		Validate: func(res *resource.Decoded[*pbfoov1.Zip]) error {
			if res.Data.Zap == "bad" {
				return resource.ErrInvalidField{Name: "zap", Wrapped: fmt.Errorf("is bad")}
			}
			return nil
		},
	})
}

// start starts a server with ACLs (a call without a token is allowed
// everything) and returns it.
func start(t *testing.T) *resourcetest.Service {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acl.yaml")
	require.NoError(t, os.WriteFile(path, []byte(policy), 0o600))
	src, err := acl.NewSource(path, nil)
	require.NoError(t, err)
	resolve := func(ctx context.Context) (resource.Authorizer, error) {
		if len(metadata.ValueFromIncomingContext(ctx, resource.TokenMetadataKey)) == 0 {
			return resource.AllowAll, nil
		}
		return src.Resolve(ctx)
	}
	return resourcetest.StartService(t,
		resourcetest.WithTypes(foo.RegisterTypes, registerWidget),
		resourcetest.WithACLResolver(resolve),
		resourcetest.OverGRPC(),
	)
}

func as(t *testing.T, secret string) context.Context {
	return metadata.AppendToOutgoingContext(t.Context(), resource.TokenMetadataKey, secret)
}

func id(typ *pbresource.Type, ns, name string) *pbresource.ID {
	return &pbresource.ID{Type: typ, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: ns}, Name: name}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	require.NoError(t, err)
	return a
}

func widget(t *testing.T, name, zap string) *pbresource.Resource {
	return &pbresource.Resource{Id: id(widgetType, "default", name), Data: mustAny(t, &pbfoov1.Zip{Zap: zap})}
}

func bar(t *testing.T, name string, owner *pbresource.ID) *pbresource.Resource {
	return &pbresource.Resource{Id: id(foo.BarV1Type, "default", name), Owner: owner, Data: mustAny(t, &pbfoov1.Bar{Baz: name})}
}

func list(t *testing.T, svc *resourcetest.Service, typ *pbresource.Type) []*pbresource.Resource {
	t.Helper()
	rsp, err := svc.Client.List(t.Context(), &pbresource.ListRequest{Type: typ, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}})
	require.NoError(t, err)
	return rsp.Resources
}

func counts(rsp *pbbulkv1.ImportResponse) [4]uint64 {
	return [4]uint64{rsp.Created, rsp.Updated, rsp.Unchanged, rsp.Rejected}
}

// One bad resource rejects the import: nothing is written, and every
// rejected resource is reported, with its index and reason.
func TestImportAtomicOnBadItems(t *testing.T) {
	svc := start(t)
	good := widget(t, "good", "ok")
	res := []*pbresource.Resource{
		bar(t, "owned", id(foo.BarV1Type, "default", "parent")), // owner later in the stream
		good,
		widget(t, "refused", "bad"), // Validate
		bar(t, "orphan", id(foo.BarV1Type, "default", "missing")), // owner nowhere
		widget(t, "good", "again"),                                // duplicate name
		{Id: id(widgetType, "default", "Not_A_Name"), Data: mustAny(t, &pbfoov1.Zip{})},
		bar(t, "parent", nil),
		{Id: id(widgetType, "default", "wrong-data"), Data: mustAny(t, &pbfoov1.Bar{})},
	}
	rsp, err := bulk.SendImport(t.Context(), svc.Bulk, nil, res)
	require.NoError(t, err)
	require.Equal(t, [4]uint64{0, 0, 0, 5}, counts(rsp))
	var got []string
	for _, r := range rsp.Rejections {
		got = append(got, fmt.Sprintf("%d %s", r.Index, codes.Code(r.Code)))
	}
	require.Equal(t, []string{"2 InvalidArgument", "3 InvalidArgument", "4 InvalidArgument", "5 InvalidArgument", "7 InvalidArgument"}, got)
	require.Contains(t, rsp.Rejections[0].Reason, "zap")
	require.Contains(t, rsp.Rejections[1].Reason, "does not exist")
	require.Contains(t, rsp.Rejections[2].Reason, "resource 1 of the import")
	require.Empty(t, list(t, svc, widgetType))
	require.Empty(t, list(t, svc, foo.BarV1Type))

	// The reasons are bounded; the rest are counted.
	var many []*pbresource.Resource
	for i := range bulk.DefaultLimits.MaxRejections + 7 {
		many = append(many, widget(t, fmt.Sprintf("w%d", i), "bad"))
	}
	rsp, err = bulk.SendImport(t.Context(), svc.Bulk, nil, append(many, good))
	require.NoError(t, err)
	require.EqualValues(t, bulk.DefaultLimits.MaxRejections+7, rsp.Rejected)
	require.Len(t, rsp.Rejections, bulk.DefaultLimits.MaxRejections)
	require.EqualValues(t, 7, rsp.RejectionsOmitted)
	require.Empty(t, list(t, svc, widgetType))

	// Without the bad ones, all are written, owners first.
	rsp, err = bulk.SendImport(t.Context(), svc.Bulk, nil, []*pbresource.Resource{res[0], res[1], res[6]})
	require.NoError(t, err)
	require.Equal(t, [4]uint64{3, 0, 0, 0}, counts(rsp))
	bars := list(t, svc, foo.BarV1Type)
	require.Len(t, bars, 2)
}

// A second run of an import changes nothing, and keeps what controllers
// added (finalizers, statuses); a changed resource is updated.
func TestReimportUnchanged(t *testing.T) {
	svc := start(t)
	res := []*pbresource.Resource{
		bar(t, "child", id(foo.BarV1Type, "default", "parent")),
		bar(t, "parent", nil),
		widget(t, "w", "one"),
	}
	rsp, err := bulk.SendImport(t.Context(), svc.Bulk, nil, res)
	require.NoError(t, err)
	require.Equal(t, [4]uint64{3, 0, 0, 0}, counts(rsp))

	// A controller adds a finalizer and a status.
	w, err := svc.Client.Read(t.Context(), &pbresource.ReadRequest{Id: id(widgetType, "default", "w")})
	require.NoError(t, err)
	stored := w.Resource
	stored.Metadata = map[string]string{resource.FinalizerKey: "ctl/cleanup"}
	wr, err := svc.Client.Write(t.Context(), &pbresource.WriteRequest{Resource: stored})
	require.NoError(t, err)
	_, err = svc.Client.WriteStatus(t.Context(), &pbresource.WriteStatusRequest{Id: wr.Resource.Id, Version: wr.Resource.Version, Key: "ctl",
		Status: &pbresource.Status{ObservedGeneration: wr.Resource.Generation}})
	require.NoError(t, err)
	before := list(t, svc, widgetType)[0]

	// The file has a status, which is ignored, as apply ignores it.
	res[2] = proto.Clone(res[2]).(*pbresource.Resource)
	res[2].Status = map[string]*pbresource.Status{"other": {ObservedGeneration: "x"}}
	rsp, err = bulk.SendImport(t.Context(), svc.Bulk, nil, res)
	require.NoError(t, err)
	require.Equal(t, [4]uint64{0, 0, 3, 0}, counts(rsp))
	require.Equal(t, []pbbulkv1.Outcome{pbbulkv1.Outcome_OUTCOME_UNCHANGED, pbbulkv1.Outcome_OUTCOME_UNCHANGED, pbbulkv1.Outcome_OUTCOME_UNCHANGED}, rsp.Outcomes)
	after := list(t, svc, widgetType)[0]
	require.Equal(t, before.Version, after.Version)
	require.Equal(t, "ctl/cleanup", after.Metadata[resource.FinalizerKey])
	require.Contains(t, after.Status, "ctl")

	// One change: one update, the finalizer and status kept.
	res[2] = widget(t, "w", "two")
	rsp, err = bulk.SendImport(t.Context(), svc.Bulk, &pbbulkv1.ImportOptions{DryRun: true}, res)
	require.NoError(t, err)
	require.Equal(t, [4]uint64{0, 1, 2, 0}, counts(rsp))
	require.Equal(t, pbbulkv1.Outcome_OUTCOME_UPDATED, rsp.Outcomes[2])
	require.True(t, rsp.DryRun)
	require.Equal(t, before.Version, list(t, svc, widgetType)[0].Version, "a dry run writes nothing")
	rsp, err = bulk.SendImport(t.Context(), svc.Bulk, nil, res)
	require.NoError(t, err)
	require.Equal(t, [4]uint64{0, 1, 2, 0}, counts(rsp))
	after = list(t, svc, widgetType)[0]
	require.Equal(t, "ctl/cleanup", after.Metadata[resource.FinalizerKey])
	require.Contains(t, after.Status, "ctl")
	var z pbfoov1.Zip
	require.NoError(t, after.Data.UnmarshalTo(&z))
	require.Equal(t, "two", z.Zap)
}

// Export, then import with preserve into an empty server, reproduces the
// resources: Uids, data, metadata, owners, finalizers and statuses; only
// versions are new. A second run is all unchanged.
func TestExportImportPreserve(t *testing.T) {
	src := start(t)
	seed(t, src.Client)
	dst := start(t)
	RequireRoundTrip(t, src.Bulk, dst.Bulk)
}

// seed writes owners, owned resources, finalizers, a deletion mark and
// statuses through client.
func seed(t *testing.T, client pbresource.ResourceServiceClient) {
	t.Helper()
	ctx := t.Context()
	write := func(res *pbresource.Resource) *pbresource.Resource {
		rsp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: res})
		require.NoError(t, err)
		return rsp.Resource
	}
	parent := write(bar(t, "parent", nil))
	for i := range 3 {
		child := bar(t, fmt.Sprintf("child-%d", i), parent.Id)
		child.Metadata = map[string]string{resource.FinalizerKey: "ctl/a ctl/b", "team": "x"}
		c := write(child)
		_, err := client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: c.Id, Version: c.Version, Key: "ctl",
			Status: &pbresource.Status{ObservedGeneration: c.Generation, Conditions: []*pbresource.Condition{{Type: "Ready", State: pbresource.Condition_STATE_TRUE}}}})
		require.NoError(t, err)
	}
	// child-0 is marked for deletion, held by its finalizers.
	_, err := client.Delete(ctx, &pbresource.DeleteRequest{Id: id(foo.BarV1Type, "default", "child-0")})
	require.NoError(t, err)
	write(&pbresource.Resource{Id: &pbresource.ID{Type: foo.QuxType, Name: "cluster-wide"}, Data: mustAny(t, &pbfoov1.Qux{Note: "n"})})
	for i := range 25 {
		write(widget(t, fmt.Sprintf("w-%02d", i), "z"))
	}
}

// RequireRoundTrip exports everything from src, imports it with preserve
// into dst, which must be empty, and checks that dst exports the same.
func RequireRoundTrip(t *testing.T, src, dst pbbulkv1.BulkServiceClient) {
	t.Helper()
	ctx := t.Context()
	exported, version, err := bulk.ReceiveExport(ctx, src, &pbbulkv1.ExportRequest{WithStatus: true, ChunkSize: 7})
	require.NoError(t, err)
	require.NotEmpty(t, version)
	require.Equal(t, 30, len(exported))
	rsp, err := bulk.SendImport(ctx, dst, &pbbulkv1.ImportOptions{Preserve: true}, exported)
	require.NoError(t, err)
	require.Equal(t, [4]uint64{30, 0, 0, 0}, counts(rsp), "%v", rsp.Rejections)

	imported, _, err := bulk.ReceiveExport(ctx, dst, &pbbulkv1.ExportRequest{WithStatus: true})
	require.NoError(t, err)
	require.Len(t, imported, len(exported))
	byName := map[string]*pbresource.Resource{}
	for _, r := range imported {
		byName[resource.ReferenceString(r.Id)] = r
	}
	for _, want := range exported {
		got := byName[resource.ReferenceString(want.Id)]
		require.NotNil(t, got, resource.ReferenceString(want.Id))
		w, g := proto.Clone(want).(*pbresource.Resource), proto.Clone(got).(*pbresource.Resource)
		w.Version, g.Version = "", ""
		require.True(t, proto.Equal(w, g), "%s:\nwant %v\ngot  %v", resource.ReferenceString(want.Id), w, g)
	}

	rsp, err = bulk.SendImport(ctx, dst, &pbbulkv1.ImportOptions{Preserve: true}, exported)
	require.NoError(t, err)
	require.Equal(t, [4]uint64{0, 0, 30, 0}, counts(rsp), "%v", rsp.Rejections)
}

// Preserve needs the restore capability: write access to everything is not
// enough. Taken names are rejected.
func TestPreserveACL(t *testing.T) {
	src := start(t)
	seed(t, src.Client)
	exported, _, err := bulk.ReceiveExport(t.Context(), src.Bulk, &pbbulkv1.ExportRequest{WithStatus: true})
	require.NoError(t, err)

	dst := start(t)
	_, err = bulk.SendImport(as(t, "writer-secret"), dst.Bulk, &pbbulkv1.ImportOptions{Preserve: true}, exported)
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Empty(t, list(t, dst, foo.BarV1Type))

	// A name taken by another resource is a rejection.
	_, err = dst.Client.Write(t.Context(), &pbresource.WriteRequest{Resource: widget(t, "w-03", "z")})
	require.NoError(t, err)
	rsp, err := bulk.SendImport(as(t, "admin-secret"), dst.Bulk, &pbbulkv1.ImportOptions{Preserve: true}, exported)
	require.NoError(t, err)
	require.EqualValues(t, 1, rsp.Rejected)
	require.Equal(t, codes.AlreadyExists, codes.Code(rsp.Rejections[0].Code))
	require.Len(t, list(t, dst, widgetType), 1)

	// Without preserve, a token with write access imports, by name.
	for _, r := range exported {
		r.Version, r.Id.Uid, r.Status = "", "", nil
		if r.Owner != nil {
			r.Owner.Uid = ""
		}
		delete(r.Metadata, resource.DeletionTimestampKey)
	}
	rsp, err = bulk.SendImport(as(t, "writer-secret"), dst.Bulk, nil, exported)
	require.NoError(t, err)
	require.Equal(t, [4]uint64{29, 0, 1, 0}, counts(rsp), "%v", rsp.Rejections)

	// A token that may write only namespace a is refused the rest.
	rsp, err = bulk.SendImport(as(t, "team-a-secret"), dst.Bulk, nil, []*pbresource.Resource{widget(t, "x", "z")})
	require.NoError(t, err)
	require.EqualValues(t, 1, rsp.Rejected)
	require.Equal(t, codes.PermissionDenied, codes.Code(rsp.Rejections[0].Code))
}

// Export lists the types asked for, with or without statuses, leaving out
// what the caller may not read.
func TestExport(t *testing.T) {
	svc := start(t)
	seed(t, svc.Client)
	ctx := t.Context()
	got, _, err := bulk.ReceiveExport(ctx, svc.Bulk, &pbbulkv1.ExportRequest{Types: []*pbresource.Type{foo.BarV2Type}})
	require.NoError(t, err)
	require.Len(t, got, 4)
	for _, r := range got {
		require.Empty(t, r.Status)
		require.Equal(t, "Bar", r.Id.Type.Kind)
	}
	got, _, err = bulk.ReceiveExport(ctx, svc.Bulk, &pbbulkv1.ExportRequest{Types: []*pbresource.Type{foo.BarV1Type}, WithStatus: true})
	require.NoError(t, err)
	require.NotEmpty(t, got[1].Status)

	_, err = svc.Client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id(widgetType, "a", "mine"), Data: mustAny(t, &pbfoov1.Zip{})}})
	require.NoError(t, err)
	for _, tenancy := range []*pbresource.Tenancy{nil, {Namespace: "a"}} {
		got, _, err = bulk.ReceiveExport(as(t, "team-a-secret"), svc.Bulk, &pbbulkv1.ExportRequest{Types: []*pbresource.Type{widgetType}, Tenancy: tenancy})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.Equal(t, "mine", got[0].Id.Name)
	}
	_, _, err = bulk.ReceiveExport(as(t, "team-a-secret"), svc.Bulk, &pbbulkv1.ExportRequest{Types: []*pbresource.Type{widgetType}, Tenancy: &pbresource.Tenancy{Namespace: "b"}})
	require.Equal(t, codes.PermissionDenied, status.Code(err))

	_, _, err = bulk.ReceiveExport(ctx, svc.Bulk, &pbbulkv1.ExportRequest{Types: []*pbresource.Type{{Group: "no", GroupVersion: "v1", Kind: "Such"}}})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
}

// An import with many resources of a type reads what is stored of it in
// one listing (or one by one, when the type holds many more): either way
// it finds what is stored.
func TestImportManyOfAType(t *testing.T) {
	for _, stored := range []int{100, 1000} { // listed; read one by one
		t.Run(fmt.Sprint(stored), func(t *testing.T) {
			svc := start(t)
			var all []*pbresource.Resource
			for i := range stored {
				all = append(all, widget(t, fmt.Sprintf("w%04d", i), "z"))
			}
			rsp, err := bulk.SendImport(t.Context(), svc.Bulk, nil, all)
			require.NoError(t, err)
			require.EqualValues(t, stored, rsp.Created)

			some := append([]*pbresource.Resource{}, all[:99]...)
			some = append(some, widget(t, "w0099", "changed"), widget(t, "new", "z"))
			rsp, err = bulk.SendImport(t.Context(), svc.Bulk, nil, some)
			require.NoError(t, err)
			require.Equal(t, [4]uint64{1, 1, 99, 0}, counts(rsp))
		})
	}
}
