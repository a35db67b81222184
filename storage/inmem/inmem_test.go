package inmem

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

var (
	testType    = &pbresource.Type{Group: "demo", GroupVersion: "v1", Kind: "Artist"}
	testTenancy = &pbresource.Tenancy{Partition: "default", Namespace: "default"}
	allTenancy  = &pbresource.Tenancy{Partition: storage.Wildcard, Namespace: storage.Wildcard}
)

func testResource(name string) *pbresource.Resource {
	return &pbresource.Resource{
		Id: &pbresource.ID{Uid: "uid-" + name, Name: name, Type: testType, Tenancy: testTenancy},
	}
}

func (b *Backend) watchCount() int {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	return len(b.watches)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTooSlowWithSmallLog(t *testing.T) {
	ctx := ctxT(t)
	b := New(WithWatchLogEvents(4))
	w, err := b.WatchList(ctx, storage.UnversionedTypeFrom(testType), allTenancy, "")
	require.NoError(t, err)
	other, err := b.WatchList(ctx, storage.UnversionedTypeFrom(testType), allTenancy, "")
	require.NoError(t, err)
	defer other.Close()

	for i := range 4 {
		_, err := b.WriteCAS(ctx, testResource(fmt.Sprint("r", i)))
		require.NoError(t, err)
		// Keep the other watch drained so only w falls behind.
		if i == 0 {
			ev, err := other.Next(ctx)
			require.NoError(t, err)
			require.NotNil(t, ev.GetEndOfSnapshot())
		}
		_, err = other.Next(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 2, b.watchCount())

	// The fifth change drops the first from the log of four, which w has
	// not read.
	_, err = b.WriteCAS(ctx, testResource("r4"))
	require.NoError(t, err)

	// Too slow is reported before anything else, even the snapshot's end.
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchTooSlow)
	require.Equal(t, 1, b.watchCount())
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchTooSlow)
	w.Close()
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchClosed)

	ev, err := other.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "r4", ev.GetUpsert().GetResource().GetId().GetName())
}

// TestQuietTypeSurvivesLogWrap: a watch of a type nobody writes is not
// ended when other types' changes wrap the log around it.
func TestQuietTypeSurvivesLogWrap(t *testing.T) {
	ctx := ctxT(t)
	b := New(WithWatchLogEvents(4))
	quiet := storage.UnversionedType{Group: "demo", Kind: "Quiet"}
	w, err := b.WatchList(ctx, quiet, allTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	ev, err := w.Next(ctx)
	require.NoError(t, err)
	require.NotNil(t, ev.GetEndOfSnapshot())
	var first string
	for i := range 20 {
		res, err := b.WriteCAS(ctx, testResource(fmt.Sprint("r", i)))
		require.NoError(t, err)
		if i == 0 {
			first = res.Version
		}
	}
	// Resuming from far behind the log's tail is exact while the log has
	// dropped nothing of the type.
	early, err := b.WatchListSince(ctx, quiet, allTenancy, "", storage.WatchOptions{SinceVersion: first})
	require.NoError(t, err)
	defer early.Close()

	q := testResource("q")
	q.Id.Type = &pbresource.Type{Group: "demo", GroupVersion: "v1", Kind: "Quiet"}
	q, err = b.WriteCAS(ctx, q)
	require.NoError(t, err)
	for _, w := range []storage.Watch{w, early} {
		ev, err = w.Next(ctx)
		require.NoError(t, err)
		require.Equal(t, q.Version, ev.GetUpsert().GetResource().GetVersion(), "got %v", ev)
	}

	// Once q is dropped, a version before it is too old; q's is not.
	for i := range 20 {
		_, err := b.WriteCAS(ctx, testResource(fmt.Sprint("s", i)))
		require.NoError(t, err)
	}
	old, err := b.WatchListSince(ctx, quiet, allTenancy, "", storage.WatchOptions{SinceVersion: first})
	require.NoError(t, err)
	defer old.Close()
	ev, err = old.Next(ctx)
	require.NoError(t, err)
	require.NotNil(t, ev.GetNewSnapshot(), "got %v", ev)
	fromQ, err := b.WatchListSince(ctx, quiet, allTenancy, "", storage.WatchOptions{SinceVersion: q.Version})
	require.NoError(t, err)
	defer fromQ.Close()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err = fromQ.Next(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "resumed, with nothing to say")
}

// TestReapReleasesStalledWatch: a watch nobody reads is ended by the
// writers' reap once the log has left it behind, letting go of its
// snapshot without a call to Next.
func TestReapReleasesStalledWatch(t *testing.T) {
	ctx := ctxT(t)
	b := New(WithWatchLogEvents(16))
	for i := range 10 {
		_, err := b.WriteCAS(ctx, testResource(fmt.Sprint("s", i)))
		require.NoError(t, err)
	}
	w, err := b.WatchList(ctx, storage.UnversionedTypeFrom(testType), allTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	require.Len(t, w.(*watch).snapshot, 10)
	for i := range 2 * reapEvery {
		_, err := b.WriteCAS(ctx, testResource(fmt.Sprint("r", i)))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return b.WatchStats().Dropped == 1 }, 10*time.Second, time.Millisecond)
	iw := w.(*watch)
	iw.mu.Lock()
	require.Nil(t, iw.snapshot)
	iw.mu.Unlock()
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchTooSlow)
}

func TestCloseUnregisters(t *testing.T) {
	ctx := ctxT(t)
	b := New()
	var ws []storage.Watch
	for range 3 {
		w, err := b.WatchList(ctx, storage.UnversionedTypeFrom(testType), testTenancy, "")
		require.NoError(t, err)
		ws = append(ws, w)
	}
	require.Equal(t, 3, b.watchCount())
	ws[1].Close()
	ws[1].Close()
	require.Equal(t, 2, b.watchCount())
	ws[0].Close()
	ws[2].Close()
	require.Equal(t, 0, b.watchCount())
	require.Empty(t, b.watches)
}

func TestChurnWithoutListStaysBounded(t *testing.T) {
	ctx := context.Background()
	b := New()
	for i := range 10 * compactThreshold {
		res, err := b.WriteCAS(ctx, testResource(fmt.Sprint("r", i%7)))
		require.NoError(t, err)
		require.NoError(t, b.DeleteCAS(ctx, res.Id, res.Version))
	}
	ti := b.types[storage.UnversionedTypeFrom(testType)]
	require.LessOrEqual(t, len(ti.sorted)+len(ti.pending), compactThreshold+7)

	// A List after the churn still sees exactly what is stored.
	for i := range 5 {
		_, err := b.WriteCAS(ctx, testResource(fmt.Sprint("k", 4-i)))
		require.NoError(t, err)
	}
	list, err := b.List(ctx, storage.EventualConsistency, storage.UnversionedTypeFrom(testType), testTenancy, "")
	require.NoError(t, err)
	var names []string
	for _, res := range list {
		names = append(names, res.Id.Name)
	}
	require.Equal(t, []string{"k0", "k1", "k2", "k3", "k4"}, names)
}

func TestSharedMessages(t *testing.T) {
	ctx := context.Background()
	b := New()
	w, err := b.WatchList(ctx, storage.UnversionedTypeFrom(testType), allTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	_, err = w.Next(ctx)
	require.NoError(t, err)

	in := testResource("a")
	out, err := b.WriteCAS(ctx, in)
	require.NoError(t, err)
	require.NotSame(t, in, out, "the input is copied")
	got, err := b.Read(ctx, storage.EventualConsistency, in.Id)
	require.NoError(t, err)
	require.Same(t, out, got, "reads return the stored message")
	ev, err := w.Next(ctx)
	require.NoError(t, err)
	require.Same(t, out, ev.GetUpsert().GetResource(), "events carry the stored message")
}

func TestEmptyUidKeepsStoredUid(t *testing.T) {
	ctx := context.Background()
	b := New()
	res, err := b.WriteCAS(ctx, testResource("a"))
	require.NoError(t, err)
	upd := testResource("a")
	upd.Id.Uid = ""
	upd.Version = res.Version
	got, err := b.WriteCAS(ctx, upd)
	require.NoError(t, err)
	require.Equal(t, "uid-a", got.Id.Uid)
}

func TestInvalidIDs(t *testing.T) {
	ctx := context.Background()
	b := New()
	_, err := b.Read(ctx, storage.EventualConsistency, &pbresource.ID{Name: "x"})
	require.Error(t, err)
	_, err = b.WriteCAS(ctx, &pbresource.Resource{})
	require.Error(t, err)
	require.Error(t, b.DeleteCAS(ctx, nil, ""))
	_, err = b.OwnerReferences(ctx, nil)
	require.Error(t, err)
}

// TestStalledWatchesHoldNoMemory: watches that stopped reading hold no
// events of their own: a thousand of them, through more changes than the
// log keeps, cost no more than their small structs. (Not parallel: it
// measures the heap.)
func TestStalledWatchesHoldNoMemory(t *testing.T) {
	const (
		watches = 1000
		writes  = 5000
	)
	heapAfter := func(n int) uint64 {
		ctx := context.Background()
		b := New(WithWatchLogEvents(1024))
		ws := make([]storage.Watch, n)
		for i := range ws {
			w, err := b.WatchList(ctx, storage.UnversionedTypeFrom(testType), allTenancy, "")
			require.NoError(t, err)
			ev, err := w.Next(ctx)
			require.NoError(t, err)
			require.NotNil(t, ev.GetEndOfSnapshot())
			ws[i] = w
		}
		for i := range writes {
			_, err := b.WriteCAS(ctx, testResource(fmt.Sprint("r", i)))
			require.NoError(t, err)
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		runtime.KeepAlive(ws)
		runtime.KeepAlive(b)
		return ms.HeapAlloc
	}
	without := heapAfter(0)
	with := heapAfter(watches)
	t.Logf("heap with %d stalled watches: %+d bytes", watches, int64(with)-int64(without))
	// A watch is a few hundred bytes; buffering even one pointer per change
	// per watch would be 40 MB.
	require.Less(t, int64(with)-int64(without), int64(2<<20),
		"%d stalled watches grew the heap by %d bytes", watches, int64(with)-int64(without))
}
