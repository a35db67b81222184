package conformance

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// ownerPagedLister returns b as a storage.OwnerPagedLister, skipping the
// test for a backend that does not declare the capability.
func ownerPagedLister(t *testing.T, b storage.Backend) storage.OwnerPagedLister {
	t.Helper()
	ol, ok := b.(storage.OwnerPagedLister)
	if !ok {
		t.Skip("the backend does not implement storage.OwnerPagedLister")
	}
	return ol
}

// listAllOwnedPages pages through an owner's resources with limit at
// version (empty: a new listing), checking that every page reports the
// listing's version, holds at most limit resources, and that no key comes
// twice. between, if set, runs between pages. It returns the resources by
// key and the listing's version.
func listAllOwnedPages(t *testing.T, ctx context.Context, ol storage.OwnerPagedLister, owner *pbresource.ID, version string, limit int, between func()) (map[string]*pbresource.Resource, string) {
	t.Helper()
	list := func(req storage.PageRequest) (storage.Page, error) { return ol.ListOwnedPage(ctx, owner, req) }
	return pageThrough(t, list, version, limit, between, func(res *pbresource.Resource) {
		require.Equal(t, owner.Uid, res.Owner.GetUid(), "%s is not the owner's", key(res.Id))
	})
}

// ownedFixture returns a resource of typ named name owned by owner (none if
// nil).
func ownedFixture(typ *pbresource.Type, partition, namespace, name string, owner *pbresource.ID) *pbresource.Resource {
	res := newResource(typ, partition, namespace, name)
	if owner != nil {
		res.Owner = proto.Clone(owner).(*pbresource.ID)
	}
	return res
}

// testOwnedPagesBasics: with no writes, the pages of an owner's resources,
// of several types and tenancies, are what OwnerReferences names, for page
// sizes of 1, a few and more than everything; another owner's resources,
// another lifetime of the owner and bad or future versions are refused or
// left out.
func (s *suite) testOwnedPagesBasics(t *testing.T) {
	b := s.newBackend(t)
	ol := ownerPagedLister(t, b)
	ctx := s.ctx(t)

	owner := write(t, b, newDefault("owner"))
	other := write(t, b, newResource(albumV1, "default", "default", "owner"))
	want := make(map[string]*pbresource.Resource)
	for _, typ := range []*pbresource.Type{albumV1, artistV2, otherArtistV1} {
		for _, ns := range []string{"default", "a-b", "a"} {
			for _, n := range []string{"x", "x-1", "y"} {
				res := write(t, b, ownedFixture(typ, "default", ns, n, owner.Id))
				want[key(res.Id)] = res
			}
			write(t, b, ownedFixture(typ, "default", ns, "theirs", other.Id))
			write(t, b, ownedFixture(typ, "default", ns, "nobody's", nil))
		}
	}

	refs, err := b.OwnerReferences(ctx, owner.Id)
	require.NoError(t, err)
	require.Len(t, refs, len(want))
	for _, limit := range []int{0, 1, 4, 1000} {
		got, version := listAllOwnedPages(t, ctx, ol, owner.Id, "", limit, nil)
		require.GreaterOrEqual(t, parseVersion(t, version), parseVersion(t, owner.Version))
		require.Equal(t, len(want), len(got), "limit %d", limit)
		for k, res := range want {
			requireProtoEqual(t, res, got[k], "limit %d: %s", limit, k)
		}
	}
	whole, err := ol.ListOwnedPage(ctx, owner.Id, storage.PageRequest{})
	require.NoError(t, err)
	require.False(t, whole.More)
	require.Len(t, whole.Resources, len(want))

	// Another lifetime of the owner's name owns nothing.
	earlier := proto.Clone(owner.Id).(*pbresource.ID)
	earlier.Uid = newUid()
	got, _ := listAllOwnedPages(t, ctx, ol, earlier, "", 2, nil)
	require.Empty(t, got)
	// The other owner's, of three types.
	got, _ = listAllOwnedPages(t, ctx, ol, other.Id, "", 2, nil)
	require.Len(t, got, 9)

	_, err = ol.ListOwnedPage(ctx, owner.Id, storage.PageRequest{Version: "v1", Limit: 1})
	require.ErrorIs(t, err, storage.ErrInvalidVersion)
	future := strconv.FormatUint(parseVersion(t, whole.Version)+1_000_000_000, 10)
	_, err = ol.ListOwnedPage(ctx, owner.Id, storage.PageRequest{Version: future, Limit: 1})
	require.ErrorIs(t, err, storage.ErrFutureVersion)
}

// testOwnedPagesTooOld: a page of an owner's resources at a version the
// backend no longer has is storage.ErrVersionGone.
func (s *suite) testOwnedPagesTooOld(t *testing.T) {
	if s.opts.SkipSlowWatcher {
		t.Skip("skipped by Options.SkipSlowWatcher")
	}
	b := s.newBackend(t)
	ol := ownerPagedLister(t, b)
	ctx := s.ctx(t)

	owner := write(t, b, newDefault("owner"))
	write(t, b, ownedFixture(albumV1, "default", "default", "a", owner.Id))
	churn := write(t, b, ownedFixture(albumV1, "default", "default", "b", owner.Id))
	first, err := ol.ListOwnedPage(ctx, owner.Id, storage.PageRequest{Limit: 1})
	require.NoError(t, err)
	require.True(t, first.More)
	for i := range s.opts.SlowWatcherWrites {
		churn = update(t, b, churn, "k", fmt.Sprint(i))
	}
	if s.opts.Forget != nil {
		s.opts.Forget(t, b)
	}
	last := first.Last
	_, err = ol.ListOwnedPage(ctx, owner.Id, storage.PageRequest{Version: first.Version, After: &last, Limit: 1})
	require.ErrorIs(t, err, storage.ErrVersionGone)
}

// testOwnedPagesRacingWriters: while writers create, update, delete and
// re-own (to another owner, and to none) resources of two types, between
// pages and concurrently with them, the union of the pages of an owner's
// listing is exactly what the owner owned at the listing's version, as
// watches started before the writes report it, and what one unlimited page
// at that version holds; versions of later listings do not go back.
func (s *suite) testOwnedPagesRacingWriters(t *testing.T) {
	b := s.newBackend(t)
	ol := ownerPagedLister(t, b)
	rb := resumable(t, b)
	ctx := s.ctx(t)

	owner := write(t, b, newDefault("owner"))
	rival := write(t, b, newDefault("rival"))
	owners := []*pbresource.ID{owner.Id, rival.Id, nil}
	types := []*pbresource.Type{albumV1, otherArtistV1}

	var mu sync.Mutex
	stored := make(map[string]*pbresource.Resource)
	var names []string
	const initial = 60
	for i := range initial {
		for _, typ := range types {
			for _, ns := range []string{"a", "a-b"} {
				res := write(t, b, ownedFixture(typ, "default", ns, fmt.Sprintf("r%03d", i), owners[i%3]))
				stored[key(res.Id)] = res
				names = append(names, key(res.Id))
			}
		}
	}
	var watches []storage.Watch
	want := make(map[string]*pbresource.Resource)
	for _, typ := range types {
		w, err := rb.WatchListSince(ctx, storage.UnversionedTypeFrom(typ), allTenancy, "", storage.WatchOptions{})
		require.NoError(t, err)
		defer w.Close()
		for k, res := range readSnapshot(t, ctx, w) {
			want[k] = res
		}
		watches = append(watches, w)
	}

	// change updates, re-owns, deletes or creates a resource, picked by n.
	created := 0
	change := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		k := names[(n*7919)%len(names)]
		cur := stored[k]
		switch {
		case cur == nil || n%4 == 3:
			created++
			res := write(t, b, ownedFixture(types[n%2], "default", []string{"a", "a-b"}[(n/2)%2], fmt.Sprintf("c%04d", created), owners[n%3]))
			stored[key(res.Id)] = res
			names = append(names, key(res.Id))
		case n%4 == 0:
			stored[k] = update(t, b, cur, "n", strconv.Itoa(n))
		case n%4 == 1:
			res := proto.Clone(cur).(*pbresource.Resource)
			res.Owner = nil
			if o := owners[(n/4)%3]; o != nil {
				res.Owner = proto.Clone(o).(*pbresource.ID)
			}
			stored[k] = write(t, b, res)
		default:
			require.NoError(t, b.DeleteCAS(ctx, cur.Id, cur.Version))
			stored[k] = nil
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; n <= 400; n++ {
			select {
			case <-stop:
				return
			default:
			}
			change(n)
		}
	}()
	mu.Lock()
	before := parseVersion(t, read(t, b, owner.Id).Version)
	for _, res := range stored {
		if res != nil {
			before = max(before, parseVersion(t, res.Version))
		}
	}
	mu.Unlock()
	step := 1000
	got, version := listAllOwnedPages(t, ctx, ol, owner.Id, "", 5, func() {
		for range 3 {
			step++
			change(step)
		}
	})
	close(stop)
	<-done
	v := parseVersion(t, version)
	require.GreaterOrEqual(t, v, before, "a listing is at least as recent as the writes made before it")

	// The same listing in one page, after the writes.
	whole, err := ol.ListOwnedPage(ctx, owner.Id, storage.PageRequest{Version: version})
	require.NoError(t, err)
	require.False(t, whole.More)
	require.Len(t, whole.Resources, len(got), "one page at %s holds what the pages held", version)
	for _, res := range whole.Resources {
		requireProtoEqual(t, got[key(res.Id)], res, "one page at %s", version)
	}

	// The store at version, from the watches' snapshots and their changes
	// up to version; a marker of each type ends the changes to read.
	for i, typ := range types {
		marker := write(t, b, newResource(typ, "marker", "marker", "marker"))
		require.Greater(t, parseVersion(t, marker.Version), v)
		for {
			ev := next(t, ctx, watches[i])
			if ev.GetUpsert().GetResource().GetId().GetName() == "marker" {
				break
			}
			if parseVersion(t, eventVersion(ev)) > v {
				continue
			}
			if u := ev.GetUpsert(); u != nil {
				want[key(u.Resource.Id)] = u.Resource
			} else if d := ev.GetDelete(); d != nil {
				delete(want, key(d.Resource.Id))
			}
		}
	}
	for k, res := range want {
		if res.Owner.GetUid() != owner.Id.Uid {
			delete(want, k)
		}
	}
	require.NotEmpty(t, want)
	require.Equal(t, len(want), len(got), "the pages hold what the owner owned at %s", version)
	for k, res := range want {
		requireProtoEqual(t, res, got[k], "%s at %s", k, version)
	}

	// A new listing is not older than this one.
	again, err := ol.ListOwnedPage(ctx, owner.Id, storage.PageRequest{Limit: 1})
	require.NoError(t, err)
	require.Greater(t, parseVersion(t, again.Version), v, "a later listing sees the markers")
}
