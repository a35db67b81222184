package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/server/reaper/reapertest"
	"github.com/loomrt/loom/storage"
)

// keysUnder returns the resource and owner-index keys under the backend's
// prefix (not the history's, which a deletion adds to).
func keysUnder(t *testing.T, b *Backend) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{resourceDir, ownerDir} {
		resp, err := testClient.Get(context.Background(), b.keys.prefix+dir, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		require.NoError(t, err)
		for _, kv := range resp.Kvs {
			out = append(out, string(kv.Key))
		}
	}
	return out
}

func ownedNames(t *testing.T, b *Backend, owner *pbresource.ID) []string {
	t.Helper()
	refs, err := b.OwnerReferences(context.Background(), owner)
	require.NoError(t, err)
	var out []string
	for _, ref := range refs {
		out = append(out, ref.Name+"@"+ref.Type.GroupVersion)
	}
	return out
}

// TestOwnerIndex follows the owner index through the writes the fast path
// cannot make (a changed owner, an update without Uid, a new GroupVersion)
// and checks that nothing is left in etcd once everything is deleted.
func TestOwnerIndex(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	p := b.keys.prefix

	ownerA := mustWrite(t, b, newWidget("owner-a"))
	ownerB := mustWrite(t, b, newWidget("owner-b"))

	child := newWidget("child")
	child.Owner = proto.Clone(ownerA.Id).(*pbresource.ID)
	child = mustWrite(t, b, child)
	require.Equal(t, []string{"child@v1"}, ownedNames(t, b, ownerA.Id))
	require.Contains(t, keysUnder(t, b),
		p+"/o/test/Widget/default/default/owner-a/"+ownerA.Id.Uid+"/test/Widget/default/default/child")

	// A new owner moves the index entry.
	moved := proto.Clone(child).(*pbresource.Resource)
	moved.Owner = proto.Clone(ownerB.Id).(*pbresource.ID)
	moved = mustWrite(t, b, moved)
	require.Empty(t, ownedNames(t, b, ownerA.Id))
	require.Equal(t, []string{"child@v1"}, ownedNames(t, b, ownerB.Id))

	// An update without Uid keeps the stored Uid and the owner.
	noUid := proto.Clone(moved).(*pbresource.Resource)
	noUid.Id.Uid = ""
	noUid.Metadata["k"] = "no uid"
	out := mustWrite(t, b, noUid)
	require.Equal(t, child.Id.Uid, out.Id.Uid)
	got, err := b.Read(ctx, storage.StrongConsistency, child.Id)
	require.NoError(t, err)
	require.True(t, proto.Equal(out, got), "stored %v, read %v", out, got)

	// A new GroupVersion of the owned resource shows in the index.
	v2 := proto.Clone(out).(*pbresource.Resource)
	v2.Id.Type = &pbresource.Type{Group: "test", GroupVersion: "v2", Kind: "Widget"}
	v2 = mustWrite(t, b, v2)
	require.Equal(t, []string{"child@v2"}, ownedNames(t, b, ownerB.Id))

	// Dropping the owner drops the entry; the fast path serves the next
	// write again.
	orphan := proto.Clone(v2).(*pbresource.Resource)
	orphan.Owner = nil
	orphan = mustWrite(t, b, orphan)
	require.Empty(t, ownedNames(t, b, ownerB.Id))
	orphan = touch(t, b, orphan, "fast")

	// Owned again, then deleted with its owners: nothing is left.
	owned := proto.Clone(orphan).(*pbresource.Resource)
	owned.Owner = proto.Clone(ownerA.Id).(*pbresource.ID)
	owned = mustWrite(t, b, owned)
	require.Equal(t, []string{"child@v2"}, ownedNames(t, b, ownerA.Id))
	require.NoError(t, b.DeleteCAS(ctx, owned.Id, owned.Version))
	require.Empty(t, ownedNames(t, b, ownerA.Id))
	require.NoError(t, b.DeleteCAS(ctx, ownerA.Id, ""))
	require.NoError(t, b.DeleteCAS(ctx, ownerB.Id, ownerB.Version))
	require.Empty(t, keysUnder(t, b), "a deletion leaves no index entry behind")
}

// TestOwnerIndexWrongUidUpdate checks that a write with a wrong Uid and the
// right version fails on the fast path without touching the index.
func TestOwnerIndexWrongUidUpdate(t *testing.T) {
	b := newTestBackend(t)
	owner := mustWrite(t, b, newWidget("owner"))
	child := newWidget("child")
	child.Owner = proto.Clone(owner.Id).(*pbresource.ID)
	child = mustWrite(t, b, child)

	other := proto.Clone(child).(*pbresource.Resource)
	other.Id.Uid = newWidget("x").Id.Uid
	other.Owner = nil
	_, err := b.WriteCAS(context.Background(), other)
	require.ErrorIs(t, err, storage.ErrWrongUid)
	require.Equal(t, []string{"child@v1"}, ownedNames(t, b, owner.Id))
}

// TestListOrderAcrossTenancies lists across namespaces whose names sort
// differently as etcd keys ("a-b/" < "a/") and as names ("a" < "a-b").
func TestListOrderAcrossTenancies(t *testing.T) {
	b := newTestBackend(t)
	var want []string
	for _, ten := range [][2]string{{"a", "a"}, {"a", "a-b"}, {"a", "b"}, {"a-b", "a"}, {"b", "a"}} {
		for _, name := range []string{"x", "x-y"} {
			res := newWidget(name)
			res.Id.Tenancy = &pbresource.Tenancy{Partition: ten[0], Namespace: ten[1]}
			mustWrite(t, b, res)
			want = append(want, ten[0]+"/"+ten[1]+"/"+name)
		}
	}
	list := func(ten *pbresource.Tenancy) []string {
		t.Helper()
		got, err := b.List(context.Background(), storage.EventualConsistency, widget, ten, "")
		require.NoError(t, err)
		var out []string
		for _, res := range got {
			out = append(out, res.Id.Tenancy.Partition+"/"+res.Id.Tenancy.Namespace+"/"+res.Id.Name)
		}
		return out
	}
	require.Equal(t, want, list(anyTenancy))
	require.Equal(t, want[:6], list(&pbresource.Tenancy{Partition: "a", Namespace: storage.Wildcard}))
	require.Empty(t, list(&pbresource.Tenancy{Partition: "c", Namespace: storage.Wildcard}))
	require.Equal(t, []string{"a/a/x", "a/a/x-y", "a-b/a/x", "a-b/a/x-y", "b/a/x", "b/a/x-y"},
		list(&pbresource.Tenancy{Partition: storage.Wildcard, Namespace: "a"}))
}

// TestRejectsSlashes checks that IDs whose parts would change the key
// layout are refused, not stored under a misleading key.
func TestRejectsSlashes(t *testing.T) {
	b := newTestBackend(t)
	ctx := context.Background()
	for _, mutate := range []func(*pbresource.Resource){
		func(r *pbresource.Resource) { r.Id.Name = "a/b" },
		func(r *pbresource.Resource) { r.Id.Tenancy.Namespace = "a/b" },
		func(r *pbresource.Resource) { r.Id.Uid = "a/b" },
		func(r *pbresource.Resource) { r.Owner = &pbresource.ID{Name: "a/b", Type: widgetType} },
	} {
		res := newWidget("ok")
		mutate(res)
		_, err := b.WriteCAS(ctx, res)
		require.ErrorIs(t, err, errBadID)
	}
	list, err := b.List(ctx, storage.EventualConsistency, widget, anyTenancy, "a/")
	require.NoError(t, err)
	require.Empty(t, list)
	require.Empty(t, keysUnder(t, b))
}

// TestUpdatePaths checks which updates take one round trip and that the
// others still come out right.
func TestUpdatePaths(t *testing.T) {
	b := newTestBackend(t)
	owner := mustWrite(t, b, newWidget("owner"))
	res := newWidget("res")
	res.Owner = proto.Clone(owner.Id).(*pbresource.ID)
	res = mustWrite(t, b, res)

	slow := b.slowWrites.Load()
	res = touch(t, b, res, "1")
	res = touch(t, b, res, "2")
	plain := touch(t, b, mustWrite(t, b, newWidget("plain")), "1")
	require.Equal(t, slow, b.slowWrites.Load(), "updates that keep Uid, owner and GroupVersion take the fast path")
	require.Equal(t, "1", plain.Metadata["k"])

	// A resource with nothing after its Id: its stored value ends with the
	// identity, so updates take the slow path, and work.
	bare := &pbresource.Resource{Id: newWidget("bare").Id}
	bare = mustWrite(t, b, bare)
	again := proto.Clone(bare).(*pbresource.Resource)
	again = mustWrite(t, b, again)
	require.Greater(t, b.slowWrites.Load(), slow)
	got, err := b.Read(context.Background(), storage.EventualConsistency, bare.Id)
	require.NoError(t, err)
	require.True(t, proto.Equal(again, got))
	_, err = b.WriteCAS(context.Background(), bare) // stale now
	require.ErrorIs(t, err, storage.ErrCASFailure)
}

// TestNoOrphans races creates of owned resources against their owner's
// deletion through the ResourceService on etcd, with the reaper running:
// nothing acknowledged survives it, and no tombstone is left.
func TestNoOrphans(t *testing.T) {
	t.Parallel()
	reapertest.RunOwnerDeleteRace(t, newTestBackend(t), reapertest.Race{Owners: 100, Creators: 4, Timeout: 60 * time.Second})
}

// TestRecreatedOwner deletes an owner and creates it again before the
// reaper has removed what its earlier lifetime owned, on etcd: the new
// owner ends up with a child of its own.
func TestRecreatedOwner(t *testing.T) {
	t.Parallel()
	reapertest.RunRecreatedOwner(t, newTestBackend(t))
}
