package host_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server/bulk"
)

// The logical backup an operator takes to move a dev server to etcd: an
// export of the dev server, imported with preserve into a fresh
// etcd-backed host, reproduces every resource (Uids, data, metadata,
// owners, finalizers, deletion marks, statuses); only versions are new.
// Importing it again changes nothing.
func TestHostExportImportToEtcd(t *testing.T) {
	dev := startHost(t, "-dev")
	devConn := dialPlain(t, dev.grpcAddr)
	client := pbresource.NewResourceServiceClient(devConn)
	ctx := t.Context()
	write := func(name string, owner *pbresource.ID, meta map[string]string) *pbresource.Resource {
		data, err := anypb.New(&pbfoov1.Zip{Zap: name})
		require.NoError(t, err)
		out, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: zipID(name), Owner: owner, Data: data, Metadata: meta}})
		require.NoError(t, err)
		return out.Resource
	}
	root := write("root", nil, map[string]string{"team": "a"})
	for i := range 20 {
		child := write(fmt.Sprintf("child-%02d", i), root.Id, map[string]string{resource.FinalizerKey: "ctl/keep"})
		_, err := client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: child.Id, Version: child.Version, Key: "ctl",
			Status: &pbresource.Status{ObservedGeneration: child.Generation, Conditions: []*pbresource.Condition{{Type: "Ready", State: pbresource.Condition_STATE_TRUE}}}})
		require.NoError(t, err)
		write(fmt.Sprintf("grandchild-%02d", i), child.Id, nil)
	}
	_, err := client.Delete(ctx, &pbresource.DeleteRequest{Id: zipID("child-00")}) // marked, held by its finalizer
	require.NoError(t, err)

	types := []*pbresource.Type{foo.ZipType}
	exported, _, err := bulk.ReceiveExport(ctx, pbbulkv1.NewBulkServiceClient(devConn), &pbbulkv1.ExportRequest{Types: types, WithStatus: true})
	require.NoError(t, err)
	require.Len(t, exported, 41)

	prod := startHost(t, backendArgs(startBackend(t, "etcd"), "/bulk")...)
	prodBulk := pbbulkv1.NewBulkServiceClient(dialPlain(t, prod.grpcAddr))
	rsp, err := bulk.SendImport(ctx, prodBulk, &pbbulkv1.ImportOptions{Preserve: true}, exported)
	require.NoError(t, err)
	require.EqualValues(t, 41, rsp.Created, "%v", rsp.Rejections)

	imported, _, err := bulk.ReceiveExport(ctx, prodBulk, &pbbulkv1.ExportRequest{Types: types, WithStatus: true})
	require.NoError(t, err)
	require.Len(t, imported, len(exported))
	byName := map[string]*pbresource.Resource{}
	for _, r := range imported {
		byName[r.Id.Name] = r
	}
	for _, want := range exported {
		got := byName[want.Id.Name]
		require.NotNil(t, got, want.Id.Name)
		require.NotEqual(t, want.Version, "")
		w, g := proto.Clone(want).(*pbresource.Resource), proto.Clone(got).(*pbresource.Resource)
		w.Version, g.Version = "", ""
		require.True(t, proto.Equal(w, g), "%s:\nwant %v\ngot  %v", want.Id.Name, w, g)
	}
	require.Contains(t, byName["child-00"].Metadata, resource.DeletionTimestampKey)

	rsp, err = bulk.SendImport(ctx, prodBulk, &pbbulkv1.ImportOptions{Preserve: true}, exported)
	require.NoError(t, err)
	require.EqualValues(t, 41, rsp.Unchanged, "%v", rsp.Rejections)
	require.Zero(t, rsp.Created+rsp.Updated+rsp.Rejected)
}

// -bulk-max-items bounds one import: beyond it, the import is refused
// whole with ResourceExhausted, and nothing is written.
func TestHostBulkMaxItems(t *testing.T) {
	h := startHost(t, "-dev", "-bulk-max-items", "3")
	conn := dialPlain(t, h.grpcAddr)
	var items []*pbresource.Resource
	for i := range 4 {
		data, err := anypb.New(&pbfoov1.Zip{Zap: "z"})
		require.NoError(t, err)
		items = append(items, &pbresource.Resource{Id: zipID(fmt.Sprint("z", i)), Data: data})
	}
	_, err := bulk.SendImport(t.Context(), pbbulkv1.NewBulkServiceClient(conn), &pbbulkv1.ImportOptions{}, items)
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	require.Contains(t, err.Error(), "3")
	rsp, err := pbresource.NewResourceServiceClient(conn).List(t.Context(), &pbresource.ListRequest{Type: foo.ZipType, Tenancy: zipID("x").Tenancy})
	require.NoError(t, err)
	require.Empty(t, rsp.Resources)
	_, err = bulk.SendImport(t.Context(), pbbulkv1.NewBulkServiceClient(conn), &pbbulkv1.ImportOptions{}, items[:3])
	require.NoError(t, err)
}
