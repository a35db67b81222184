package conformance

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// pagedLister returns b as a storage.PagedLister, skipping the test for a
// backend that does not declare the capability.
func pagedLister(t *testing.T, b storage.Backend) storage.PagedLister {
	t.Helper()
	pl, ok := b.(storage.PagedLister)
	if !ok {
		t.Skip("the backend does not implement storage.PagedLister")
	}
	return pl
}

// listAllPages pages through a listing with limit, checking that every page
// reports the first page's version and that no key comes twice. It returns
// the resources by key and the listing's version.
func listAllPages(t *testing.T, ctx context.Context, pl storage.PagedLister, typ storage.UnversionedType, tenancy *pbresource.Tenancy, prefix string, limit int, between func()) (map[string]*pbresource.Resource, string) {
	t.Helper()
	list := func(req storage.PageRequest) (storage.Page, error) {
		return pl.ListPage(ctx, typ, tenancy, prefix, req)
	}
	return pageThrough(t, list, "", limit, between, nil)
}

// pageThrough pages with list at version (empty: a new listing) and limit,
// checking that every page reports the listing's version and holds at most
// limit resources (if limit is not 0), and that no key comes twice. check,
// if set, checks every resource; between, if set, runs between pages. It
// returns the resources by key and the listing's version.
func pageThrough(t *testing.T, list func(storage.PageRequest) (storage.Page, error), version string, limit int, between func(), check func(*pbresource.Resource)) (map[string]*pbresource.Resource, string) {
	t.Helper()
	got := make(map[string]*pbresource.Resource)
	req := storage.PageRequest{Version: version, Limit: limit}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10000, "paging does not end")
		page, err := list(req)
		require.NoError(t, err)
		if req.Version == "" {
			req.Version = page.Version
			parseVersion(t, page.Version)
		}
		require.Equal(t, req.Version, page.Version, "every page reports the listing's version")
		if limit > 0 {
			require.LessOrEqual(t, len(page.Resources), limit)
		}
		for _, res := range page.Resources {
			k := key(res.Id)
			require.NotContains(t, got, k, "a key on two pages")
			if check != nil {
				check(res)
			}
			got[k] = res
		}
		if !page.More {
			return got, req.Version
		}
		last := page.Last
		req.After = &last
		if between != nil {
			between()
		}
	}
}

// testPagesBasics: with no writes, the pages of a listing hold exactly what
// List returns, for every kind of query, and page sizes of 1, a few and
// more than everything; an unlimited first page is List with its version.
func (s *suite) testPagesBasics(t *testing.T) {
	b := s.newBackend(t)
	pl := pagedLister(t, b)
	ctx := s.ctx(t)

	for _, p := range []string{"default", "p-1", "p"} {
		for _, ns := range []string{"default", "a-b", "a"} {
			for _, n := range []string{"x", "x-1", "y", "xy"} {
				write(t, b, newResource(artistV1, p, ns, n))
			}
		}
	}
	write(t, b, newResource(artistV2, "default", "default", "v2"))
	write(t, b, newResource(albumV1, "default", "default", "x"))
	write(t, b, newResource(otherArtistV1, "default", "default", "x"))

	queries := []struct {
		tenancy *pbresource.Tenancy
		prefix  string
	}{
		{allTenancy, ""},
		{allTenancy, "x"},
		{defaultTenancy, ""},
		{defaultTenancy, "x"},
		{&pbresource.Tenancy{Partition: "p", Namespace: storage.Wildcard}, ""},
		{&pbresource.Tenancy{Partition: storage.Wildcard, Namespace: "a"}, "x-"},
		{&pbresource.Tenancy{Partition: "none", Namespace: "none"}, ""},
	}
	for _, q := range queries {
		listed, err := b.List(ctx, storage.EventualConsistency, artist, q.tenancy, q.prefix)
		require.NoError(t, err)
		want := make(map[string]*pbresource.Resource, len(listed))
		for _, res := range listed {
			want[key(res.Id)] = res
		}
		what := fmt.Sprintf("tenancy %v prefix %q", q.tenancy, q.prefix)
		for _, limit := range []int{1, 4, 1000} {
			got, _ := listAllPages(t, ctx, pl, artist, q.tenancy, q.prefix, limit, nil)
			require.Equal(t, len(want), len(got), "%s limit %d", what, limit)
			for k, res := range want {
				requireProtoEqual(t, res, got[k], "%s limit %d: %s", what, limit, k)
			}
		}
		whole, err := pl.ListPage(ctx, artist, q.tenancy, q.prefix, storage.PageRequest{})
		require.NoError(t, err)
		require.False(t, whole.More)
		require.Len(t, whole.Resources, len(listed), what)
		for i := range listed {
			requireProtoEqual(t, listed[i], whole.Resources[i], "%s: an unlimited page is List", what)
		}
	}
}

// testPagesRacingWriters: while writers create, update and delete
// resources, between pages and concurrently with them, the union of the
// pages of a listing is the store exactly as it was at the listing's
// version, as a watch started before the writes reports it.
func (s *suite) testPagesRacingWriters(t *testing.T) {
	b := s.newBackend(t)
	pl := pagedLister(t, b)
	rb := resumable(t, b)
	ctx := s.ctx(t)

	const initial = 150
	var mu sync.Mutex
	stored := make(map[string]*pbresource.Resource)
	var names []string
	for i := range initial {
		for _, ns := range []string{"a", "a-b"} {
			res := write(t, b, newResource(artistV1, "default", ns, fmt.Sprintf("r%03d", i)))
			stored[key(res.Id)] = res
			names = append(names, key(res.Id))
		}
	}
	w, err := rb.WatchListSince(ctx, artist, allTenancy, "", storage.WatchOptions{})
	require.NoError(t, err)
	defer w.Close()
	snap := readSnapshot(t, ctx, w)
	require.Len(t, snap, 2*initial)

	// change updates, deletes or creates a resource, picked by n.
	created := 0
	change := func(n int) {
		mu.Lock()
		defer mu.Unlock()
		k := names[(n*7919)%len(names)]
		cur := stored[k]
		switch {
		case cur == nil || n%3 == 2:
			created++
			res := write(t, b, newResource(artistV1, "default", []string{"a", "a-b"}[n%2], fmt.Sprintf("c%04d", created)))
			stored[key(res.Id)] = res
			names = append(names, key(res.Id))
		case n%3 == 0:
			stored[k] = update(t, b, cur, "n", strconv.Itoa(n))
		default:
			require.NoError(t, b.DeleteCAS(ctx, cur.Id, cur.Version))
			stored[k] = nil
		}
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := 1; n <= 300; n++ {
			select {
			case <-stop:
				return
			default:
			}
			change(n)
		}
	}()
	step := 1000
	got, version := listAllPages(t, ctx, pl, artist, allTenancy, "", 7, func() {
		for range 3 {
			step++
			change(step)
		}
	})
	close(stop)
	<-done

	// The store at version, from the watch's snapshot and its changes up to
	// version; the marker ends the changes to read.
	v := parseVersion(t, version)
	marker := write(t, b, newResource(artistV1, "marker", "marker", "marker"))
	want := snap
	for {
		ev := next(t, ctx, w)
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
	require.Greater(t, parseVersion(t, marker.Version), v, "the listing's version is before the later writes")
	require.Equal(t, len(want), len(got), "the pages hold the store at %s", version)
	for k, res := range want {
		requireProtoEqual(t, res, got[k], "%s at %s", k, version)
	}
}

// testPagesTooOld: a page at a version the backend no longer has is
// storage.ErrVersionGone; bad and future versions are refused.
func (s *suite) testPagesTooOld(t *testing.T) {
	b := s.newBackend(t)
	pl := pagedLister(t, b)
	ctx := s.ctx(t)

	_, err := pl.ListPage(ctx, artist, defaultTenancy, "", storage.PageRequest{Version: "v1", Limit: 1})
	require.ErrorIs(t, err, storage.ErrInvalidVersion)

	write(t, b, newDefault("a"))
	churn := write(t, b, newDefault("b"))
	first, err := pl.ListPage(ctx, artist, defaultTenancy, "", storage.PageRequest{Limit: 1})
	require.NoError(t, err)
	require.True(t, first.More)
	future := strconv.FormatUint(parseVersion(t, first.Version)+1000, 10)
	_, err = pl.ListPage(ctx, artist, defaultTenancy, "", storage.PageRequest{Version: future, Limit: 1})
	require.ErrorIs(t, err, storage.ErrFutureVersion)

	if s.opts.SkipSlowWatcher {
		t.Skip("the too-old part is skipped by Options.SkipSlowWatcher")
	}
	for i := range s.opts.SlowWatcherWrites {
		churn = update(t, b, churn, "k", fmt.Sprint(i))
	}
	if s.opts.Forget != nil {
		s.opts.Forget(t, b)
	}
	last := first.Last
	_, err = pl.ListPage(ctx, artist, defaultTenancy, "", storage.PageRequest{Version: first.Version, After: &last, Limit: 1})
	require.ErrorIs(t, err, storage.ErrVersionGone)
}

// testPagesChangesBetween: creates, updates, deletes and a delete then
// re-create of one name, made between two pages before and after the
// cursor, do not show in the listing's later pages.
func (s *suite) testPagesChangesBetween(t *testing.T) {
	b := s.newBackend(t)
	pl := pagedLister(t, b)
	ctx := s.ctx(t)

	at := make(map[string]*pbresource.Resource)
	for _, n := range []string{"a", "b", "d", "e", "f"} {
		at[n] = write(t, b, newDefault(n))
	}
	first, err := pl.ListPage(ctx, artist, defaultTenancy, "", storage.PageRequest{Limit: 2})
	require.NoError(t, err)
	require.Len(t, first.Resources, 2)
	requireProtoEqual(t, at["a"], first.Resources[0])
	requireProtoEqual(t, at["b"], first.Resources[1])

	update(t, b, at["a"], "k", "behind the cursor")
	write(t, b, newDefault("a0"))
	write(t, b, newDefault("c"))
	require.NoError(t, b.DeleteCAS(ctx, at["d"].Id, at["d"].Version))
	require.NoError(t, b.DeleteCAS(ctx, at["e"].Id, at["e"].Version))
	write(t, b, newDefault("e"))
	update(t, b, at["f"], "k", "ahead of the cursor")

	last := first.Last
	rest, err := pl.ListPage(ctx, artist, defaultTenancy, "", storage.PageRequest{Version: first.Version, After: &last})
	require.NoError(t, err)
	require.Equal(t, first.Version, rest.Version)
	require.False(t, rest.More)
	require.Len(t, rest.Resources, 3, "d, e and f as they were at %s", first.Version)
	for i, n := range []string{"d", "e", "f"} {
		requireProtoEqual(t, at[n], rest.Resources[i])
	}
}
