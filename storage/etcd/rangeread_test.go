package etcd

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// listNames lists widgets in ten and returns partition/namespace/name of
// each, in List's order.
func listNames(t *testing.T, b *Backend, ten *pbresource.Tenancy, namePrefix string) []string {
	t.Helper()
	got, err := b.List(context.Background(), storage.EventualConsistency, widget, ten, namePrefix)
	require.NoError(t, err)
	var out []string
	for _, res := range got {
		out = append(out, res.Id.Tenancy.Partition+"/"+res.Id.Tenancy.Namespace+"/"+res.Id.Name)
	}
	return out
}

// TestListInPages checks that a List read in pages gives what one read
// gives, in List's order, with and without filtering, whatever the page
// size.
func TestListInPages(t *testing.T) {
	b := newTestBackend(t)
	var all []string
	for _, ten := range [][2]string{{"a", "a"}, {"a", "a-b"}, {"a", "b"}, {"a-b", "a"}, {"b", "a"}} {
		for _, name := range []string{"x", "x-y", "y"} {
			res := newWidget(name)
			res.Id.Tenancy = &pbresource.Tenancy{Partition: ten[0], Namespace: ten[1]}
			mustWrite(t, b, res)
			all = append(all, ten[0]+"/"+ten[1]+"/"+name)
		}
	}
	cases := []struct {
		ten    *pbresource.Tenancy
		prefix string
	}{
		{anyTenancy, ""},
		{anyTenancy, "x"},
		{&pbresource.Tenancy{Partition: "a", Namespace: storage.Wildcard}, ""},
		{&pbresource.Tenancy{Partition: storage.Wildcard, Namespace: "a"}, "x-"},
		{&pbresource.Tenancy{Partition: "a", Namespace: "a-b"}, ""},
		{&pbresource.Tenancy{Partition: "a", Namespace: "a-b"}, "x"},
	}
	want := make([][]string, len(cases))
	for i, c := range cases {
		want[i] = listNames(t, b, c.ten, c.prefix)
	}
	require.Equal(t, all, want[0])
	for _, size := range []int64{1, 2, 4, 7} {
		b.pageSize = size
		pages := 0
		b.afterPage = func(int64) { pages++ }
		for i, c := range cases {
			require.Equal(t, want[i], listNames(t, b, c.ten, c.prefix), "page size %d, case %d", size, i)
		}
		require.Positive(t, pages)
	}
}

// TestListInPagesIsConsistent checks that every page of a List is read at
// the revision of the first: writes made meanwhile are not in it.
func TestListInPagesIsConsistent(t *testing.T) {
	b := newTestBackend(t)
	var want []string
	stored := map[string]*pbresource.Resource{}
	for i := range 10 {
		res := mustWrite(t, b, newWidget(fmt.Sprint("w", i)))
		stored[res.Id.Name] = res
		want = append(want, "default/default/"+res.Id.Name)
	}
	b.pageSize = 3
	ctx := context.Background()
	first := true
	b.afterPage = func(int64) {
		if !first {
			return
		}
		first = false
		// After the first page: delete one the next pages hold, change
		// another, add one after all of them.
		require.NoError(t, b.DeleteCAS(ctx, stored["w8"].Id, stored["w8"].Version))
		changed := newWidget("w5")
		changed.Id = stored["w5"].Id
		changed.Version = stored["w5"].Version
		changed.Metadata = map[string]string{"changed": "yes"}
		mustWrite(t, b, changed)
		mustWrite(t, b, newWidget("w99"))
	}
	got, err := b.List(ctx, storage.StrongConsistency, widget, &pbresource.Tenancy{Partition: "default", Namespace: "default"}, "")
	require.NoError(t, err)
	require.False(t, first, "the list was not read in pages")
	var names []string
	for _, res := range got {
		names = append(names, "default/default/"+res.Id.Name)
		require.Equal(t, stored[res.Id.Name].Version, res.Version)
		require.Equal(t, map[string]string{"k": "v"}, res.Metadata)
	}
	require.Equal(t, want, names)

	b.afterPage = nil
	require.Equal(t, append(append(append([]string{}, want[:8]...), want[9]), "default/default/w99"),
		listNames(t, b, &pbresource.Tenancy{Partition: "default", Namespace: "default"}, ""))
}

// TestListInPagesAfterCompaction checks that a List whose revision etcd
// compacts between two pages starts again at a new revision, and gives up
// with etcd's error when that keeps happening.
func TestListInPagesAfterCompaction(t *testing.T) {
	b := isolatedBackend(t)
	ctx := testContext(t)
	for i := range 6 {
		mustWrite(t, b, newWidget(fmt.Sprint("w", i)))
	}
	b.pageSize = 2
	ten := &pbresource.Tenancy{Partition: "default", Namespace: "default"}

	var revs []int64
	b.afterPage = func(rev int64) {
		if len(revs) == 0 || revs[len(revs)-1] != rev {
			revs = append(revs, rev)
			if len(revs) == 1 {
				compactAfterWrite(t, b, "late")
			}
		}
	}
	got, err := b.List(ctx, storage.EventualConsistency, widget, ten, "w")
	require.NoError(t, err)
	require.Len(t, got, 6)
	require.Len(t, revs, 2, "one restart, at a new revision")

	n := 0
	b.afterPage = func(int64) {
		n++
		compactAfterWrite(t, b, fmt.Sprint("late", n))
	}
	_, err = b.List(ctx, storage.EventualConsistency, widget, ten, "")
	require.ErrorIs(t, err, rpctypes.ErrCompacted)
	require.Equal(t, maxRangeRestarts+1, n, "pages read")
}

// compactAfterWrite writes a widget named name and compacts etcd's history
// up to that write.
func compactAfterWrite(t *testing.T, b *Backend, name string) {
	t.Helper()
	ctx := context.Background()
	res := mustWrite(t, b, newWidget(name))
	resp, err := b.client.Get(ctx, "compact-here")
	require.NoError(t, err)
	require.NotEmpty(t, res.Version)
	_, err = b.client.Compact(ctx, resp.Header.Revision)
	require.NoError(t, err)
}
