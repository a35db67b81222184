package etcd

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// etcdWatchers reads the etcd server's count of its watchers, from the
// embedded etcds of this process (etcdtest.Start), whose metrics are
// registered with Prometheus' default registry.
func etcdWatchers(t *testing.T) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == "etcd_debugging_mvcc_watcher_total" {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatal("the etcd server exports no etcd_debugging_mvcc_watcher_total")
	return 0
}

// upsertedName returns the name of an Upsert's resource, or a description
// of another event.
func upsertedName(ev *pbresource.WatchEvent) string {
	if u := ev.GetUpsert(); u != nil {
		return u.Resource.Id.Name
	}
	return fmt.Sprint(ev)
}

// TestWatchersShareOneEtcdWatch opens many watches of several types and
// tenancies on one backend: etcd counts one watcher for all of them (the
// change feed's), each watch gets exactly its changes, and once the last
// is closed etcd's watcher is gone too. Not parallel: the gauge is the
// process's.
func TestWatchersShareOneEtcdWatch(t *testing.T) {
	b := isolatedBackend(t)
	ctx := testContext(t)
	base := etcdWatchers(t)

	const perKind = 100
	gadgetType := &pbresource.Type{Group: "test", GroupVersion: "v1", Kind: "Gadget"}
	var widgets, gadgets, prefixed []storage.Watch
	open := func(typ *pbresource.Type, prefix string) storage.Watch {
		w, err := b.WatchList(ctx, storage.UnversionedTypeFrom(typ), anyTenancy, prefix)
		require.NoError(t, err)
		t.Cleanup(w.Close)
		require.NotNil(t, nextEvent(t, ctx, w).GetEndOfSnapshot())
		return w
	}
	for range perKind {
		widgets = append(widgets, open(widgetType, ""))
		gadgets = append(gadgets, open(gadgetType, ""))
		prefixed = append(prefixed, open(widgetType, "b"))
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, base+1, etcdWatchers(t), "one etcd watcher for %d watches", 3*perKind)
	}, 10*time.Second, 10*time.Millisecond)

	mustWrite(t, b, newWidget("a"))
	mustWrite(t, b, newWidget("b"))
	g := newWidget("g")
	g.Id.Type = gadgetType
	mustWrite(t, b, g)
	for _, w := range widgets {
		require.Equal(t, "a", upsertedName(nextEvent(t, ctx, w)))
		require.Equal(t, "b", upsertedName(nextEvent(t, ctx, w)))
	}
	for _, w := range gadgets {
		require.Equal(t, "g", upsertedName(nextEvent(t, ctx, w)))
	}
	for _, w := range prefixed {
		require.Equal(t, "b", upsertedName(nextEvent(t, ctx, w)))
	}
	require.Equal(t, base+1, etcdWatchers(t))

	for _, ws := range [][]storage.Watch{widgets, gadgets, prefixed} {
		for _, w := range ws {
			w.Close()
		}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, base, etcdWatchers(t), "the feed's etcd watch ends with the last watch")
	}, 10*time.Second, 10*time.Millisecond)
	require.Equal(t, storage.WatchStats{}, b.WatchStats())
}

// TestStuckWatchersDropped: watches that read their snapshot and stop
// reading are dropped once the ring drops a change they had not read,
// while a watch that keeps reading gets every change and the writer never
// waits for anyone.
func TestStuckWatchersDropped(t *testing.T) {
	const (
		ring   = 64
		writes = 4 * ring
		stuck  = 50
	)
	b := newTestBackend(t, WithWatchLogEvents(ring))
	ctx := testContext(t)
	var stuckWatches []storage.Watch
	for range stuck {
		w, err := b.WatchList(ctx, widget, anyTenancy, "")
		require.NoError(t, err)
		defer w.Close()
		require.NotNil(t, nextEvent(t, ctx, w).GetEndOfSnapshot())
		stuckWatches = append(stuckWatches, w)
	}
	fast, err := b.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	defer fast.Close()
	require.NotNil(t, nextEvent(t, ctx, fast).GetEndOfSnapshot())

	var wg sync.WaitGroup
	fastErr := make(chan error, 1)
	wg.Go(func() {
		for i := range writes {
			ev, err := fast.Next(ctx)
			if err != nil {
				fastErr <- err
				return
			}
			if got, want := upsertedName(ev), fmt.Sprintf("w%04d", i); got != want {
				fastErr <- fmt.Errorf("event %d: got %s, want %s", i, got, want)
				return
			}
		}
	})
	for i := range writes {
		mustWrite(t, b, newWidget(fmt.Sprintf("w%04d", i)))
	}
	wg.Wait()
	close(fastErr)
	require.NoError(t, <-fastErr)

	for i, w := range stuckWatches {
		var err error
		for err == nil {
			_, err = w.Next(ctx)
		}
		require.ErrorIs(t, err, storage.ErrWatchTooSlow, "stuck watch %d", i)
	}
	require.Equal(t, storage.WatchStats{Open: 1, Dropped: stuck}, b.WatchStats())
}

// resumeFrom resumes a watch of widgets after since and returns its first
// n events.
func resumeFrom(t *testing.T, ctx context.Context, b *Backend, since string, n int) []string {
	t.Helper()
	w, err := b.WatchListSince(ctx, widget, anyTenancy, "", storage.WatchOptions{SinceVersion: since})
	require.NoError(t, err)
	defer w.Close()
	var got []string
	for range n {
		ev := nextEvent(t, ctx, w)
		switch {
		case ev.GetNewSnapshot() != nil:
			got = append(got, "new-snapshot")
		case ev.GetEndOfSnapshot() != nil:
			got = append(got, "end-of-snapshot")
		default:
			got = append(got, upsertedName(ev))
		}
	}
	return got
}

// TestCatchUpBound resumes watches from a version the ring no longer
// holds: with a catch-up slot free they catch up from etcd's history and
// go on in the ring; with every slot taken they get a fresh snapshot; and
// however many resume at once, each gets one or the other, whole.
func TestCatchUpBound(t *testing.T) {
	const ring, n = 4, 12
	b := newTestBackend(t, WithWatchLogEvents(ring), WithCatchUps(2))
	ctx := testContext(t)
	// keep keeps the feed running; it is never read again.
	keep, err := b.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	defer keep.Close()
	require.NotNil(t, nextEvent(t, ctx, keep).GetEndOfSnapshot())

	var names []string
	var first *pbresource.Resource
	for i := range n {
		res := mustWrite(t, b, newWidget(fmt.Sprintf("w%02d", i)))
		if first == nil {
			first = res
		}
		names = append(names, res.Id.Name)
	}
	v, err := strconv.ParseInt(first.Version, 10, 64)
	require.NoError(t, err)
	since := strconv.FormatInt(v-1, 10)
	// The ring has dropped the first changes (rather than being yet to
	// receive them).
	require.Eventually(t, func() bool {
		b.feed.mu.RLock()
		defer b.feed.mu.RUnlock()
		return b.feed.floor >= v
	}, 10*time.Second, time.Millisecond)

	// A slot free: exactly the changes after since, then the ring's.
	got := resumeFrom(t, ctx, b, since, n)
	require.Equal(t, names, got)

	// Every slot taken: a fresh snapshot.
	b.catchUpSlots <- struct{}{}
	b.catchUpSlots <- struct{}{}
	got = resumeFrom(t, ctx, b, since, 2)
	require.Equal(t, []string{"new-snapshot", names[0]}, got)
	<-b.catchUpSlots
	<-b.catchUpSlots

	// Many at once: each catches up or starts afresh, and the changes
	// after the catch-up come from the ring.
	var wg, placed sync.WaitGroup
	results := make(chan []string, 20)
	for range cap(results) {
		placed.Add(1)
		wg.Go(func() {
			w, err := b.WatchListSince(ctx, widget, anyTenancy, "", storage.WatchOptions{SinceVersion: since})
			placed.Done()
			if err != nil {
				results <- []string{err.Error()}
				return
			}
			defer w.Close()
			var got []string
			for len(got) < n+1 {
				ev, err := w.Next(ctx)
				if err != nil {
					got = append(got, err.Error())
					break
				}
				if ev.GetNewSnapshot() != nil || ev.GetEndOfSnapshot() != nil {
					got = append(got, "snapshot")
					continue
				}
				got = append(got, upsertedName(ev))
			}
			results <- got
		})
	}
	// The change each watch ends with, made once every watch is placed.
	placed.Wait()
	last := mustWrite(t, b, newWidget("z-last"))
	wg.Wait()
	close(results)
	caughtUp := append(append([]string(nil), names...), last.Id.Name)
	for got := range results {
		if got[0] == "snapshot" {
			// NewSnapshot, then the snapshot of the n resources.
			require.Equal(t, append([]string{"snapshot"}, names...), got)
			continue
		}
		require.Equal(t, caughtUp, got)
	}
}

// TestWatchSnapshotOlderThanRing places a watch whose snapshot is older
// than everything the ring holds (changes made between the snapshot read
// and the placing overflowed it): it catches up from etcd's history.
func TestWatchSnapshotOlderThanRing(t *testing.T) {
	b := newTestBackend(t, WithWatchLogEvents(2))
	ctx := testContext(t)
	keep, err := b.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	defer keep.Close()
	require.NotNil(t, nextEvent(t, ctx, keep).GetEndOfSnapshot())

	var names []string
	b.beforeWatch = func(rev int64) {
		for i := range 6 {
			names = append(names, mustWrite(t, b, newWidget(fmt.Sprintf("w%d", i))).Id.Name)
		}
		require.Eventually(t, func() bool {
			b.feed.mu.RLock()
			defer b.feed.mu.RUnlock()
			return b.feed.floor > rev
		}, 10*time.Second, time.Millisecond)
	}
	w, err := b.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	require.NotNil(t, nextEvent(t, ctx, w).GetEndOfSnapshot())
	for _, name := range names {
		require.Equal(t, name, upsertedName(nextEvent(t, ctx, w)))
	}
	after := mustWrite(t, b, newWidget("after"))
	require.Equal(t, after.Id.Name, upsertedName(nextEvent(t, ctx, w)))
}

// TestBookmarksFollowEtcd: an idle watch's bookmarks move with writes
// outside the backend's keys too, through etcd's progress notifications on
// the feed's stream.
func TestBookmarksFollowEtcd(t *testing.T) {
	b := newTestBackend(t)
	ctx := testContext(t)
	w, err := b.WatchListSince(ctx, widget, anyTenancy, "", storage.WatchOptions{BookmarkInterval: 5 * time.Millisecond})
	require.NoError(t, err)
	defer w.Close()
	require.NotNil(t, nextEvent(t, ctx, w).GetEndOfSnapshot())
	resp, err := testClient.Put(ctx, "/outside-every-backend", "x")
	require.NoError(t, err)
	outside := resp.Header.Revision
	for {
		ev := nextEvent(t, ctx, w)
		bm := ev.GetBookmark()
		require.NotNil(t, bm, "only bookmarks, got %v", ev)
		v, err := strconv.ParseInt(bm.Version, 10, 64)
		require.NoError(t, err)
		if v >= outside {
			break
		}
	}
	a := mustWrite(t, b, newWidget("a"))
	ev := nextEvent(t, ctx, w)
	for ev.GetBookmark() != nil {
		ev = nextEvent(t, ctx, w)
	}
	require.Equal(t, a.Version, ev.GetUpsert().GetResource().GetVersion())
}
