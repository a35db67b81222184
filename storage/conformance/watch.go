package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

func next(t *testing.T, ctx context.Context, w storage.Watch) *pbresource.WatchEvent {
	t.Helper()
	ev, err := w.Next(ctx)
	require.NoError(t, err)
	require.NotNil(t, ev)
	return ev
}

func requireEndOfSnapshot(t *testing.T, ev *pbresource.WatchEvent) {
	t.Helper()
	require.NotNil(t, ev.GetEndOfSnapshot(), "want EndOfSnapshot, got %v", ev)
}

// readSnapshot reads Upserts up to EndOfSnapshot and returns them by key,
// failing on anything else or on a resource reported twice.
func readSnapshot(t *testing.T, ctx context.Context, w storage.Watch) map[string]*pbresource.Resource {
	t.Helper()
	out := map[string]*pbresource.Resource{}
	for {
		ev := next(t, ctx, w)
		if ev.GetEndOfSnapshot() != nil {
			return out
		}
		res := ev.GetUpsert().GetResource()
		require.NotNil(t, res, "the snapshot holds only Upserts, got %v", ev)
		k := key(res.Id)
		require.NotContains(t, out, k, "resource reported twice in the snapshot")
		out[k] = res
	}
}

// describe renders a delta as "U key@version" or "D key@version".
func describe(ev *pbresource.WatchEvent) string {
	switch {
	case ev.GetUpsert() != nil:
		res := ev.GetUpsert().GetResource()
		return "U " + key(res.GetId()) + "@" + res.GetVersion()
	case ev.GetDelete() != nil:
		res := ev.GetDelete().GetResource()
		return "D " + key(res.GetId()) + "@" + res.GetVersion()
	case ev.GetEndOfSnapshot() != nil:
		return "EndOfSnapshot"
	}
	return fmt.Sprintf("unknown event %v", ev)
}

func upserted(res *pbresource.Resource) string { return "U " + key(res.Id) + "@" + res.Version }
func deleted(res *pbresource.Resource) string  { return "D " + key(res.Id) + "@" + res.Version }

func (s *suite) testWatchSnapshotThenDeltas(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)

	a := write(t, b, newDefault("a"))
	bb := write(t, b, newDefault("b"))
	c := write(t, b, newDefault("c"))
	write(t, b, newResource(albumV1, "default", "default", "a"))
	write(t, b, newResource(artistV1, "default", "other", "a"))

	w, err := b.WatchList(ctx, artist, defaultTenancy, "")
	require.NoError(t, err)
	defer w.Close()

	snap := readSnapshot(t, ctx, w)
	require.Len(t, snap, 3)
	for _, res := range []*pbresource.Resource{a, bb, c} {
		requireProtoEqual(t, res, snap[key(res.Id)])
	}

	a2 := update(t, b, a, "k", "2")
	d := write(t, b, newDefault("d"))
	require.NoError(t, b.DeleteCAS(ctx, bb.Id, bb.Version))
	write(t, b, newResource(albumV1, "default", "default", "b"))
	c2 := update(t, b, c, "k", "2")
	c3 := update(t, b, c2, "k", "3")
	require.NoError(t, b.DeleteCAS(ctx, c3.Id, ""))
	c4 := write(t, b, newDefault("c"))

	want := []*pbresource.WatchEvent{
		upsertEvent(a2), upsertEvent(d), deleteEvent(bb), upsertEvent(c2), upsertEvent(c3),
		deleteEvent(c3), // a Delete carries the last stored resource
		upsertEvent(c4),
	}
	for i, wantEv := range want {
		got := next(t, ctx, w)
		requireEventEqual(t, wantEv, got, "event %d", i)
	}
}

// requireEventEqual compares events, ignoring the store versions a backend
// may add to Delete and EndOfSnapshot events (see storage.ResumableBackend).
func requireEventEqual(t *testing.T, want, got *pbresource.WatchEvent, msgAndArgs ...any) {
	t.Helper()
	if got.GetDelete().GetVersion() != "" || got.GetEndOfSnapshot().GetVersion() != "" {
		got = proto.Clone(got).(*pbresource.WatchEvent)
		if d := got.GetDelete(); d != nil {
			d.Version = ""
		}
		if e := got.GetEndOfSnapshot(); e != nil {
			e.Version = ""
		}
	}
	requireProtoEqual(t, want, got, msgAndArgs...)
}

func upsertEvent(res *pbresource.Resource) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{
		Upsert: &pbresource.WatchEvent_Upsert{Resource: res}}}
}

func deleteEvent(res *pbresource.Resource) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Delete_{
		Delete: &pbresource.WatchEvent_Delete{Resource: res}}}
}

func (s *suite) testWatchEmptySnapshot(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)
	write(t, b, newResource(albumV1, "default", "default", "a"))

	w, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	requireEndOfSnapshot(t, next(t, ctx, w))

	a := write(t, b, newDefault("a"))
	requireProtoEqual(t, upsertEvent(a), next(t, ctx, w))
}

// watchFilter is a WatchList query, matched against resources by a
// reference implementation of the filter rules.
type watchFilter struct {
	typ               storage.UnversionedType
	partition, nspace string
	prefix            string
}

func (f watchFilter) matches(id *pbresource.ID) bool {
	return storage.UnversionedTypeFrom(id.Type) == f.typ &&
		(f.partition == storage.Wildcard || f.partition == id.Tenancy.Partition) &&
		(f.nspace == storage.Wildcard || f.nspace == id.Tenancy.Namespace) &&
		strings.HasPrefix(id.Name, f.prefix)
}

func (s *suite) testWatchFilters(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)
	const wild = storage.Wildcard

	filters := []watchFilter{
		{artist, wild, wild, ""},
		{artist, "p1", wild, ""},
		{artist, wild, "ns1", ""},
		{artist, "p1", "ns1", ""},
		{artist, wild, wild, "al"},
		{artist, "p1", "ns1", "b"},
		{artist, "p1", wild, "al"},
		{album, wild, wild, ""},
	}

	// The state before the watches start.
	var before []*pbresource.Resource
	for _, res := range []*pbresource.Resource{
		newResource(artistV1, "p1", "ns1", "alpha"),
		newResource(artistV2, "p1", "ns2", "alpha"),
		newResource(artistV1, "p2", "ns1", "beta"),
		newResource(artistV1, "p2", "ns2", "alpha"),
		newResource(albumV1, "p1", "ns1", "alpha"),
		newResource(otherArtistV1, "p1", "ns1", "alpha"),
		newResource(artistV1, "p10", "ns10", "alpha"),
		newResource(artistV1, "p1", "ns10", "b"),
	} {
		before = append(before, write(t, b, res))
	}

	watches := make([]storage.Watch, len(filters))
	for i, f := range filters {
		w, err := b.WatchList(ctx, f.typ, &pbresource.Tenancy{Partition: f.partition, Namespace: f.nspace}, f.prefix)
		require.NoError(t, err)
		defer w.Close()
		watches[i] = w
	}

	// The changes after the watches started, as the events they cause.
	var changes []*pbresource.WatchEvent
	up := func(res *pbresource.Resource) { changes = append(changes, upsertEvent(res)) }
	up(write(t, b, newResource(otherArtistV1, "p1", "ns1", "beta")))
	up(write(t, b, newResource(albumV1, "p2", "ns2", "beta")))
	up(update(t, b, before[0], "k", "v"))
	up(write(t, b, newResource(artistV2, "p1", "ns1", "beta")))
	require.NoError(t, b.DeleteCAS(ctx, before[2].Id, before[2].Version))
	changes = append(changes, deleteEvent(before[2]))
	up(write(t, b, newResource(artistV1, "p10", "ns1", "alpha")))
	up(write(t, b, newResource(artistV1, "p1", "ns10", "bravo")))
	up(write(t, b, newResource(artistV1, "p1", "ns1", "al-marker")))
	up(write(t, b, newResource(artistV1, "p1", "ns1", "b-marker")))
	up(write(t, b, newResource(albumV1, "p1", "ns1", "marker")))

	for i, f := range filters {
		name := fmt.Sprintf("watch %s %s/%s %q", f.typ.Kind, f.partition, f.nspace, f.prefix)
		w := watches[i]

		var wantSnap []string
		for _, res := range before {
			if f.matches(res.Id) {
				wantSnap = append(wantSnap, upserted(res))
			}
		}
		var gotSnap []string
		for _, res := range readSnapshot(t, ctx, w) {
			gotSnap = append(gotSnap, upserted(res))
		}
		require.ElementsMatch(t, wantSnap, gotSnap, name)

		var wantDeltas []string
		for _, ev := range changes {
			res := ev.GetUpsert().GetResource()
			if res == nil {
				res = ev.GetDelete().GetResource()
			}
			if f.matches(res.Id) {
				wantDeltas = append(wantDeltas, describe(ev))
			}
		}
		require.NotEmpty(t, wantDeltas, "every filter matches a marker")
		// Nothing was written after the markers, so an event the watch
		// should not have had shifts the sequence.
		var gotDeltas []string
		for range wantDeltas {
			gotDeltas = append(gotDeltas, describe(next(t, ctx, w)))
		}
		require.Equal(t, wantDeltas, gotDeltas, name)
	}
}

func (s *suite) testWatchGroupVersions(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)
	a := write(t, b, newResource(artistV1, "default", "default", "a"))
	c := write(t, b, newResource(artistV2, "default", "default", "c"))

	w, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	snap := readSnapshot(t, ctx, w)
	require.Len(t, snap, 2)
	requireProtoEqual(t, a, snap[key(a.Id)])
	requireProtoEqual(t, c, snap[key(c.Id)])

	a2 := proto.Clone(a).(*pbresource.Resource)
	a2.Id.Type = proto.Clone(artistV2).(*pbresource.Type)
	a2 = write(t, b, a2)
	requireProtoEqual(t, upsertEvent(a2), next(t, ctx, w))
	d := write(t, b, newResource(artistV2, "default", "default", "d"))
	requireProtoEqual(t, upsertEvent(d), next(t, ctx, w))
}

// racer runs writers against one backend until told to stop, so a watch
// can be started in the middle of their writes.
type racer struct {
	count   atomic.Int64
	stopAt  atomic.Int64
	started chan struct{} // closed after startAfter writes
	wg      sync.WaitGroup
	errs    chan error

	mu       sync.Mutex
	versions []uint64 // every version a successful WriteCAS returned
}

// race starts writers goroutines each running op repeatedly until stop, op
// gets the writer's index, its private random source and the op count.
func (s *suite) race(t *testing.T, writers, startAfter int, op func(w int, rnd *rand.Rand, i int) (*pbresource.Resource, error)) *racer {
	r := &racer{started: make(chan struct{}), errs: make(chan error, writers)}
	r.stopAt.Store(math.MaxInt64)
	t.Cleanup(func() {
		r.stopAt.Store(0)
		r.wg.Wait()
	})
	for w := range writers {
		r.wg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 42))
			for i := 0; r.count.Load() < r.stopAt.Load(); i++ {
				res, err := op(w, rnd, i)
				if err != nil {
					r.errs <- err
					return
				}
				if res != nil {
					v, err := strconv.ParseUint(res.Version, 10, 64)
					if err != nil {
						r.errs <- err
						return
					}
					r.mu.Lock()
					r.versions = append(r.versions, v)
					r.mu.Unlock()
				}
				if r.count.Add(1) == int64(startAfter) {
					close(r.started)
				}
			}
		})
	}
	return r
}

// withoutUid returns id without its Uid, to read whatever lifetime of the
// name is stored.
func withoutUid(id *pbresource.ID) *pbresource.ID {
	c := proto.Clone(id).(*pbresource.ID)
	c.Uid = ""
	return c
}

// waitStarted waits until the writers made their first writes.
func (s *suite) waitStarted(t *testing.T, r *racer) {
	t.Helper()
	timer := time.NewTimer(s.opts.Timeout)
	defer timer.Stop()
	select {
	case <-r.started:
	case err := <-r.errs:
		require.NoError(t, err, "racing writer")
	case <-timer.C:
		require.FailNow(t, "timed out waiting for the first writes")
	}
}

// stopAfter lets the writers make about n more operations.
func (r *racer) stopAfter(n int) {
	r.stopAt.Store(r.count.Load() + int64(n))
}

// waitWriters waits for the writers to stop and checks their errors.
func (s *suite) waitWriters(t *testing.T, r *racer) {
	t.Helper()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	s.wait(t, done, "racing writers")
	close(r.errs)
	for err := range r.errs {
		require.NoError(t, err)
	}
}

// requireMonotonicRead checks that Read does not return older data than an
// event already delivered. deletesAllowed accepts NotFound, for tests where
// the resource may have been deleted since.
func requireMonotonicRead(t *testing.T, b storage.Backend, res *pbresource.Resource, deletesAllowed bool) {
	t.Helper()
	id := proto.Clone(res.Id).(*pbresource.ID)
	id.Uid = ""
	got, err := b.Read(context.Background(), storage.EventualConsistency, id)
	if deletesAllowed && errors.Is(err, storage.ErrNotFound) {
		return
	}
	require.NoError(t, err, "Read after the event of %s", key(res.Id))
	require.GreaterOrEqual(t, parseVersion(t, got.Version), parseVersion(t, res.Version),
		"Read returned older data than a delivered event")
}

// requireViewIsList checks that what a watch built from its events equals
// what List returns.
func requireViewIsList(t *testing.T, b storage.Backend, view map[string]*pbresource.Resource) {
	t.Helper()
	list, err := b.List(context.Background(), storage.EventualConsistency, artist, allTenancy, "")
	require.NoError(t, err)
	want := map[string]string{}
	for _, res := range list {
		want[key(res.Id)] = res.Version
	}
	got := map[string]string{}
	for k, res := range view {
		got[k] = res.Version
	}
	require.Equal(t, want, got, "the state built from the watch differs from List")
}

// testWatchRacingWriters starts a watch while writers create and update
// resources, and checks that the watch reports every write after its
// snapshot exactly once, in order. With no deletes, the snapshot holds the
// latest version of each resource as of some revision R, so the greatest
// version in it is the last write at or before R, and the deltas must be
// exactly the writes with greater versions.
func (s *suite) testWatchRacingWriters(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)
	const (
		writers  = 4
		names    = 5
		startAt  = 100
		moreOps  = 400
		tenancyP = "default"
	)
	r := s.race(t, writers, startAt, func(w int, _ *rand.Rand, i int) (*pbresource.Resource, error) {
		name := fmt.Sprintf("w%d-%d", w, i%names)
		res := newResource(artistV1, tenancyP, "default", name)
		if i >= names {
			cur, err := b.Read(context.Background(), storage.EventualConsistency, withoutUid(res.Id))
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", name, err)
			}
			res = proto.Clone(cur).(*pbresource.Resource)
			res.Metadata["op"] = strconv.Itoa(i)
		}
		return b.WriteCAS(context.Background(), res)
	})
	s.waitStarted(t, r)

	w, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	r.stopAfter(moreOps)

	view := readSnapshot(t, ctx, w)
	require.NotEmpty(t, view)
	var snapMax uint64
	for _, res := range view {
		snapMax = max(snapMax, parseVersion(t, res.Version))
	}

	s.waitWriters(t, r)
	marker := write(t, b, newResource(artistV1, "default", "default", "marker"))

	var got []uint64
	for {
		ev := next(t, ctx, w)
		res := ev.GetUpsert().GetResource()
		require.NotNil(t, res, "only Upserts expected, got %s", describe(ev))
		if res.Id.Name == marker.Id.Name {
			requireProtoEqual(t, marker, res)
			view[key(res.Id)] = res
			break
		}
		requireMonotonicRead(t, b, res, false)
		got = append(got, parseVersion(t, res.Version))
		view[key(res.Id)] = res
	}

	var want []uint64
	for _, v := range r.versions {
		if v > snapMax {
			want = append(want, v)
		}
	}
	slices.Sort(want)
	require.NotEmpty(t, want, "the writers did not race the watch")
	require.Equal(t, want, got, "deltas must be exactly the writes after the snapshot, in commit order")
	requireViewIsList(t, b, view)
}

// testWatchRacingWritersWithDeletes is testWatchRacingWriters with deletes
// in the mix. Each event is checked against the state the watch built so
// far: an Upsert never goes back in version, a Delete removes a resource
// the watch knows, with the version the watch last saw, and in the end the
// state equals List.
func (s *suite) testWatchRacingWritersWithDeletes(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)
	const (
		writers = 4
		names   = 4
		startAt = 100
		moreOps = 400
	)
	r := s.race(t, writers, startAt, func(w int, rnd *rand.Rand, i int) (*pbresource.Resource, error) {
		name := fmt.Sprintf("w%d-%d", w, rnd.IntN(names))
		res := newResource(artistV1, "default", "default", name)
		cur, err := b.Read(context.Background(), storage.EventualConsistency, withoutUid(res.Id))
		switch {
		case errors.Is(err, storage.ErrNotFound):
			return b.WriteCAS(context.Background(), res)
		case err != nil:
			return nil, err
		case rnd.IntN(3) == 0:
			return nil, b.DeleteCAS(context.Background(), cur.Id, cur.Version)
		default:
			res = proto.Clone(cur).(*pbresource.Resource)
			res.Metadata["op"] = strconv.Itoa(i)
			return b.WriteCAS(context.Background(), res)
		}
	})
	s.waitStarted(t, r)

	w, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	r.stopAfter(moreOps)

	view := readSnapshot(t, ctx, w)
	var last uint64
	for _, res := range view {
		last = max(last, parseVersion(t, res.Version))
	}

	s.waitWriters(t, r)
	marker := write(t, b, newResource(artistV1, "default", "default", "marker"))

	deletes := 0
	for {
		ev := next(t, ctx, w)
		if res := ev.GetDelete().GetResource(); res != nil {
			k := key(res.Id)
			old, ok := view[k]
			require.True(t, ok, "Delete of %s, which the watch does not know: a gap or a duplicate", k)
			requireProtoEqual(t, old, res, "a Delete carries the last stored resource")
			delete(view, k)
			deletes++
			continue
		}
		res := ev.GetUpsert().GetResource()
		require.NotNil(t, res, "unexpected event %s", describe(ev))
		v := parseVersion(t, res.Version)
		require.Greater(t, v, last, "Upserts after the snapshot come in commit order, each once")
		last = v
		requireMonotonicRead(t, b, res, true)
		view[key(res.Id)] = res
		if res.Id.Name == marker.Id.Name {
			break
		}
	}
	require.NotZero(t, deletes, "the writers deleted nothing while the watch ran")
	requireViewIsList(t, b, view)
}

func (s *suite) testWatchContextDone(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)

	// A deadline while Next waits.
	w, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	requireEndOfSnapshot(t, next(t, ctx, w))
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = w.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	w.Close()

	// A cancellation, while Next waits or just before it starts.
	w2, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer w2.Close()
	requireEndOfSnapshot(t, next(t, ctx, w2))
	cctx, cancel2 := context.WithCancel(ctx)
	result := make(chan error, 1)
	go func() {
		_, err := w2.Next(cctx)
		result <- err
	}()
	cancel2()
	select {
	case err := <-result:
		require.ErrorIs(t, err, context.Canceled)
	case <-ctx.Done():
		require.FailNow(t, "Next did not return after its context was cancelled")
	}
}

func (s *suite) testWatchClose(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)
	write(t, b, newDefault("a"))
	write(t, b, newDefault("b"))

	// Close in the middle of the snapshot.
	w, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	next(t, ctx, w)
	w.Close()
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchClosed)
	w.Close()
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchClosed)

	// Close with deltas pending; the backend and other watches go on.
	w1, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	readSnapshot(t, ctx, w1)
	w2, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer w2.Close()
	readSnapshot(t, ctx, w2)

	c := write(t, b, newDefault("c"))
	w1.Close()
	_, err = w1.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchClosed)
	d := write(t, b, newDefault("d"))
	requireProtoEqual(t, upsertEvent(c), next(t, ctx, w2))
	requireProtoEqual(t, upsertEvent(d), next(t, ctx, w2))
}

func (s *suite) testWatchCloseUnblocksNext(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)
	w, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	requireEndOfSnapshot(t, next(t, ctx, w))

	result := make(chan error, 1)
	go func() {
		_, err := w.Next(ctx)
		result <- err
	}()
	w.Close()
	select {
	case err := <-result:
		require.ErrorIs(t, err, storage.ErrWatchClosed)
	case <-ctx.Done():
		require.FailNow(t, "Close did not end a Next blocked on the watch")
	}
	w.Close()
}

// testSlowWatcher opens a watch nobody reads and checks that writers still
// complete every write, that another watch that keeps up gets every event,
// and that the unread watch ends with ErrWatchTooSlow.
func (s *suite) testSlowWatcher(t *testing.T) {
	if s.opts.SkipSlowWatcher {
		t.Skip("skipped by Options.SkipSlowWatcher")
	}
	b := s.newBackend(t)
	ctx := s.ctx(t)
	n := s.opts.SlowWatcherWrites

	slow, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer slow.Close()
	fast, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer fast.Close()

	// The writer runs at most this far ahead of the fast consumer, so that
	// the fast one stays within any reasonable buffer even on a busy
	// machine. The slow watch gets no such help.
	tokens := make(chan struct{}, 512)

	var fastErr error
	fastSeen := 0
	fastDone := make(chan struct{})
	go func() {
		defer close(fastDone)
		ev, err := fast.Next(ctx)
		if err != nil || ev.GetEndOfSnapshot() == nil {
			fastErr = fmt.Errorf("want EndOfSnapshot, got %v, %v", ev, err)
			return
		}
		for fastSeen < n {
			ev, err := fast.Next(ctx)
			if err != nil {
				fastErr = err
				return
			}
			if got, want := ev.GetUpsert().GetResource().GetId().GetName(), slowName(fastSeen); got != want {
				fastErr = fmt.Errorf("event %d: got %s, want an Upsert of %s", fastSeen, describe(ev), want)
				return
			}
			fastSeen++
			<-tokens
		}
	}()

	var writeErr error
	written := 0
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		for i := range n {
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				writeErr = ctx.Err()
				return
			}
			if _, err := b.WriteCAS(context.Background(), newResource(artistV1, "default", "default", slowName(i))); err != nil {
				writeErr = err
				return
			}
			written++
		}
	}()

	s.wait(t, writerDone, "writes while a watch is not read (are writers blocked by it?)")
	require.NoError(t, writeErr)
	require.Equal(t, n, written)
	s.wait(t, fastDone, "the watch that keeps up")
	require.NoError(t, fastErr)
	require.Equal(t, n, fastSeen)

	// The unread watch may hand out what it buffered, but then it must end
	// with ErrWatchTooSlow.
	for seen := 0; ; seen++ {
		require.LessOrEqual(t, seen, n, "the unread watch delivered more than was written")
		_, err := slow.Next(ctx)
		if err != nil {
			require.ErrorIs(t, err, storage.ErrWatchTooSlow)
			break
		}
	}
	_, err = slow.Next(ctx)
	require.Error(t, err, "a watch that ended stays ended")
}

func slowName(i int) string { return fmt.Sprintf("n-%06d", i) }
