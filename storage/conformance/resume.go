package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// resumable returns b as a storage.ResumableBackend, skipping the test for
// a backend that does not declare the capability.
func resumable(t *testing.T, b storage.Backend) storage.ResumableBackend {
	t.Helper()
	rb, ok := b.(storage.ResumableBackend)
	if !ok {
		t.Skip("the backend does not implement storage.ResumableBackend")
	}
	return rb
}

// eventVersion returns the resume point an event gives: its resource's
// version for an Upsert, its own version for the others ("" for
// NewSnapshot).
func eventVersion(ev *pbresource.WatchEvent) string {
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		return e.Upsert.GetResource().GetVersion()
	case *pbresource.WatchEvent_Delete_:
		return e.Delete.GetVersion()
	case *pbresource.WatchEvent_EndOfSnapshot_:
		return e.EndOfSnapshot.GetVersion()
	case *pbresource.WatchEvent_Bookmark_:
		return e.Bookmark.GetVersion()
	}
	return ""
}

// describeChange renders a delta with the version it happened at.
func describeChange(ev *pbresource.WatchEvent) string {
	if d := ev.GetDelete(); d != nil {
		return describe(ev) + "@" + d.Version
	}
	return describe(ev)
}

// testResumeBasics: resuming from a version the backend covers yields only
// the matching changes after it, with no snapshot; resuming from the current
// version yields nothing until the next change; Delete and EndOfSnapshot
// carry their versions; bad versions are refused.
func (s *suite) testResumeBasics(t *testing.T) {
	b := s.newBackend(t)
	rb := resumable(t, b)
	ctx := s.ctx(t)

	a := write(t, b, newDefault("a"))
	w, err := rb.WatchListSince(ctx, artist, defaultTenancy, "", storage.WatchOptions{})
	require.NoError(t, err)
	defer w.Close()
	snap := readSnapshot(t, ctx, w) // EndOfSnapshot's version is checked below
	require.Len(t, snap, 1)

	bb := write(t, b, newDefault("b"))
	write(t, b, newResource(albumV1, "default", "default", "x")) // another type
	write(t, b, newResource(artistV1, "default", "other", "x"))  // another namespace
	require.NoError(t, b.DeleteCAS(ctx, a.Id, a.Version))
	c := write(t, b, newDefault("c"))

	want := []string{upserted(bb), deleted(a), upserted(c)}
	var evs []*pbresource.WatchEvent
	for range want {
		evs = append(evs, next(t, ctx, w))
	}
	for i, ev := range evs {
		require.Equal(t, want[i], describe(ev))
	}
	delVersion := parseVersion(t, evs[1].GetDelete().GetVersion())
	require.Greater(t, delVersion, parseVersion(t, a.Version), "a Delete's version is the deletion's")
	require.Less(t, delVersion, parseVersion(t, c.Version))

	// From each point, exactly what followed it.
	for i, since := range []string{a.Version, bb.Version, evs[1].GetDelete().GetVersion()} {
		r, err := rb.WatchListSince(ctx, artist, defaultTenancy, "", storage.WatchOptions{SinceVersion: since})
		require.NoError(t, err)
		var got []string
		for range want[i:] {
			got = append(got, describe(next(t, ctx, r)))
		}
		require.Equal(t, want[i:], got, "resumed after %s", since)
		r.Close()
	}

	// From the current version: nothing until the next change.
	cur, err := rb.WatchListSince(ctx, artist, defaultTenancy, "", storage.WatchOptions{SinceVersion: c.Version})
	require.NoError(t, err)
	defer cur.Close()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = cur.Next(short)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing happened after the current version")
	d := write(t, b, newDefault("d"))
	require.Equal(t, upserted(d), describe(next(t, ctx, cur)))

	// A new snapshot's EndOfSnapshot is a resume point too.
	fresh, err := rb.WatchListSince(ctx, artist, defaultTenancy, "", storage.WatchOptions{})
	require.NoError(t, err)
	defer fresh.Close()
	var eos *pbresource.WatchEvent
	for eos == nil {
		if ev := next(t, ctx, fresh); ev.GetEndOfSnapshot() != nil {
			eos = ev
		}
	}
	require.Equal(t, d.Version, eos.GetEndOfSnapshot().GetVersion(), "the snapshot is at the store's version")

	_, err = rb.WatchListSince(ctx, artist, defaultTenancy, "", storage.WatchOptions{SinceVersion: "not-a-version"})
	require.ErrorIs(t, err, storage.ErrInvalidVersion)
	_, err = rb.WatchListSince(ctx, artist, defaultTenancy, "", storage.WatchOptions{SinceVersion: fmt.Sprint(parseVersion(t, d.Version) + 1000)})
	require.ErrorIs(t, err, storage.ErrFutureVersion)
}

// testResumeRacingWriters breaks and resumes a watch again and again, from
// the version of the last event it got (bookmarks included), while writers
// create, update and delete resources of the watched type and another one.
// The changes seen across all the resumed watches must be exactly those of
// one watch that was never broken: no gap, no duplicate, versions rising.
func (s *suite) testResumeRacingWriters(t *testing.T) {
	b := s.newBackend(t)
	rb := resumable(t, b)
	ctx := s.ctx(t)
	const (
		writers = 3
		ops     = 150 // per writer; all of them fit in any reasonable log
		names   = 4
	)

	ref, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer ref.Close()
	requireEndOfSnapshot(t, next(t, ctx, ref))
	opts := storage.WatchOptions{BookmarkInterval: time.Millisecond}
	w, err := rb.WatchListSince(ctx, artist, allTenancy, "", opts)
	require.NoError(t, err)
	eos := next(t, ctx, w)
	requireEndOfSnapshot(t, eos)
	since := eos.GetEndOfSnapshot().GetVersion()
	require.NotEmpty(t, since, "EndOfSnapshot carries the snapshot's version")

	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for wr := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(wr), 7))
			stored := map[string]*pbresource.Resource{}
			for i := range ops {
				name := fmt.Sprintf("w%d-%d", wr, rng.IntN(names))
				var err error
				switch cur := stored[name]; {
				case rng.IntN(5) == 0:
					_, err = b.WriteCAS(context.Background(), newResource(albumV1, "default", "default", fmt.Sprintf("%s-%d", name, i)))
				case cur == nil:
					stored[name], err = b.WriteCAS(context.Background(), newDefault(name))
				case rng.IntN(3) == 0:
					err = b.DeleteCAS(context.Background(), cur.Id, cur.Version)
					delete(stored, name)
				default:
					res := withVersion(cur, cur.Version)
					res.Metadata["op"] = fmt.Sprint(i)
					stored[name], err = b.WriteCAS(context.Background(), res)
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d op %d: %w", wr, i, err)
					return
				}
			}
		}()
	}
	// The marker is written once the writers are done; the watch is
	// broken and resumed while they write.
	markerErr := make(chan error, 1)
	go func() {
		wg.Wait()
		_, err := b.WriteCAS(context.Background(), newDefault("marker"))
		markerErr <- err
	}()

	rng := rand.New(rand.NewPCG(1, 2))
	var got []string
	last := parseVersion(t, since)
	breakIn := 1 + rng.IntN(10)
	for {
		if breakIn == 0 {
			w.Close()
			w, err = rb.WatchListSince(ctx, artist, allTenancy, "", storage.WatchOptions{SinceVersion: since, BookmarkInterval: time.Millisecond})
			require.NoError(t, err)
			breakIn = 1 + rng.IntN(10)
		}
		breakIn--
		ev := next(t, ctx, w)
		require.Nil(t, ev.GetNewSnapshot(), "the backend could not resume after %s", since)
		require.Nil(t, ev.GetEndOfSnapshot(), "a resumed watch sends no snapshot")
		v := parseVersion(t, eventVersion(ev))
		if ev.GetBookmark() != nil {
			require.GreaterOrEqual(t, v, last, "bookmarks never go back")
		} else {
			require.Greater(t, v, last, "versions rise: %s after %d", describeChange(ev), last)
			got = append(got, describeChange(ev))
		}
		last, since = v, eventVersion(ev)
		if ev.GetUpsert().GetResource().GetId().GetName() == "marker" {
			break
		}
	}
	w.Close()
	require.NoError(t, <-markerErr)
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	var want []string
	for {
		ev := next(t, ctx, ref)
		want = append(want, describeChange(ev))
		if ev.GetUpsert().GetResource().GetId().GetName() == "marker" {
			break
		}
	}
	require.Equal(t, want, got, "the resumed watches saw what one unbroken watch saw")
}

// testResumeTooOld: a version older than what the backend keeps gives
// NewSnapshot, then the full snapshot and EndOfSnapshot, then the changes.
func (s *suite) testResumeTooOld(t *testing.T) {
	if s.opts.SkipSlowWatcher {
		t.Skip("skipped by Options.SkipSlowWatcher")
	}
	b := s.newBackend(t)
	rb := resumable(t, b)
	ctx := s.ctx(t)

	first := write(t, b, newDefault("first"))
	churn := write(t, b, newDefault("churn"))
	for i := range s.opts.SlowWatcherWrites {
		churn = update(t, b, churn, "k", fmt.Sprint(i))
	}
	if s.opts.Forget != nil {
		s.opts.Forget(t, b)
	}
	w, err := rb.WatchListSince(ctx, artist, defaultTenancy, "", storage.WatchOptions{SinceVersion: first.Version})
	require.NoError(t, err)
	defer w.Close()
	ev := next(t, ctx, w)
	require.NotNil(t, ev.GetNewSnapshot(), "want NewSnapshot first, got %s", describe(ev))
	snap := readSnapshot(t, ctx, w)
	require.Len(t, snap, 2)
	requireProtoEqual(t, first, snap[key(first.Id)])
	requireProtoEqual(t, churn, snap[key(churn.Id)])
	after := write(t, b, newDefault("after"))
	require.Equal(t, upserted(after), describe(next(t, ctx, w)))
}

// testBookmarks: an idle watch that asked for bookmarks gets them after its
// snapshot, at the store's current version, which moves with changes the
// watch does not match; resuming from a bookmark misses nothing.
func (s *suite) testBookmarks(t *testing.T) {
	if s.opts.NoBookmarks {
		t.Skip("the backend sends no bookmarks (Options.NoBookmarks)")
	}
	b := s.newBackend(t)
	rb := resumable(t, b)
	ctx := s.ctx(t)

	a := write(t, b, newDefault("a"))
	w, err := rb.WatchListSince(ctx, artist, defaultTenancy, "", storage.WatchOptions{BookmarkInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	defer w.Close()
	ev := next(t, ctx, w)
	require.Equal(t, upserted(a), describe(ev), "the snapshot comes before any bookmark")
	requireEndOfSnapshot(t, next(t, ctx, w))

	bm := next(t, ctx, w).GetBookmark()
	require.NotNil(t, bm, "an idle watch gets a bookmark")
	require.Equal(t, a.Version, bm.Version)

	other := write(t, b, newResource(albumV1, "default", "default", "x"))
	for {
		ev := next(t, ctx, w)
		bm := ev.GetBookmark()
		require.NotNil(t, bm, "only bookmarks while the type is quiet, got %s", describe(ev))
		if bm.Version == other.Version {
			break
		}
		require.Equal(t, a.Version, bm.Version)
	}
	c := write(t, b, newDefault("c"))
	r, err := rb.WatchListSince(ctx, artist, defaultTenancy, "", storage.WatchOptions{SinceVersion: other.Version})
	require.NoError(t, err)
	defer r.Close()
	require.Equal(t, upserted(c), describe(next(t, ctx, r)))
	require.Equal(t, upserted(c), describe(next(t, ctx, w)))

	// Without the option, none.
	plain, err := rb.WatchListSince(ctx, artist, defaultTenancy, "", storage.WatchOptions{SinceVersion: c.Version})
	require.NoError(t, err)
	defer plain.Close()
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = plain.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
