package inmem

import (
	"context"
	"fmt"
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
	b.mu.RLock()
	defer b.mu.RUnlock()
	n := 0
	for _, ws := range b.watches {
		n += len(ws)
	}
	return n
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTooSlowWithSmallBuffer(t *testing.T) {
	ctx := ctxT(t)
	b := New(WithWatchBufferSize(3))
	w, err := b.WatchList(ctx, storage.UnversionedTypeFrom(testType), allTenancy, "")
	require.NoError(t, err)
	other, err := b.WatchList(ctx, storage.UnversionedTypeFrom(testType), allTenancy, "")
	require.NoError(t, err)
	defer other.Close()

	for i := range 3 {
		_, err := b.WriteCAS(ctx, testResource(fmt.Sprint("r", i)))
		require.NoError(t, err)
		// Keep the other watch drained so only w overflows.
		if i == 0 {
			ev, err := other.Next(ctx)
			require.NoError(t, err)
			require.NotNil(t, ev.GetEndOfSnapshot())
		}
		_, err = other.Next(ctx)
		require.NoError(t, err)
	}
	require.Equal(t, 2, b.watchCount())

	// The fourth change overflows w's buffer of three: w is dropped at once.
	_, err = b.WriteCAS(ctx, testResource("r3"))
	require.NoError(t, err)
	require.Equal(t, 1, b.watchCount())

	// Too slow is reported before anything buffered, even the snapshot's end.
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchTooSlow)
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchTooSlow)
	w.Close()
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchClosed)

	ev, err := other.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, "r3", ev.GetUpsert().GetResource().GetId().GetName())
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
