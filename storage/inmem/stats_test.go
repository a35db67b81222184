package inmem

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/storage"
)

// TestWatchStats: open watches, the changes they buffer, and the watches
// dropped for falling behind.
func TestWatchStats(t *testing.T) {
	ctx := ctxT(t)
	b := New(WithWatchBufferSize(2))
	require.Equal(t, storage.WatchStats{}, b.WatchStats())

	fast, err := b.WatchList(ctx, storage.UnversionedTypeFrom(testType), allTenancy, "")
	require.NoError(t, err)
	slow, err := b.WatchList(ctx, storage.UnversionedTypeFrom(testType), allTenancy, "")
	require.NoError(t, err)
	ev, err := fast.Next(ctx)
	require.NoError(t, err)
	require.NotNil(t, ev.GetEndOfSnapshot())

	write := func(i int) {
		t.Helper()
		_, err := b.WriteCAS(ctx, testResource(fmt.Sprint("r", i)))
		require.NoError(t, err)
	}
	write(0)
	write(1)
	require.Equal(t, storage.WatchStats{Open: 2, Buffered: 4}, b.WatchStats())

	// fast takes one change; the other stays buffered (the batch it took
	// holds both).
	_, err = fast.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, storage.WatchStats{Open: 2, Buffered: 3}, b.WatchStats())

	// A third change: slow's buffer (2) overflows and slow is dropped;
	// fast has room again.
	_, err = fast.Next(ctx)
	require.NoError(t, err)
	write(2)
	require.Equal(t, storage.WatchStats{Open: 1, Buffered: 1, Dropped: 1}, b.WatchStats())
	_, err = slow.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchTooSlow)
	slow.Close()

	// Closing is not dropping.
	fast.Close()
	require.Equal(t, storage.WatchStats{Dropped: 1}, b.WatchStats())
}
