package inmem

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/storage"
)

// TestWatchStats: open watches, the log entries they have not read, and the
// watches dropped for falling behind.
func TestWatchStats(t *testing.T) {
	ctx := ctxT(t)
	b := New(WithWatchLogEvents(2))
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

	// fast reads one change.
	_, err = fast.Next(ctx)
	require.NoError(t, err)
	require.Equal(t, storage.WatchStats{Open: 2, Buffered: 3}, b.WatchStats())

	// A third change drops the first from the log of two: slow, which had
	// not read it, is dropped when it next reads.
	_, err = fast.Next(ctx)
	require.NoError(t, err)
	write(2)
	_, err = slow.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchTooSlow)
	require.Equal(t, storage.WatchStats{Open: 1, Buffered: 1, Dropped: 1}, b.WatchStats())
	slow.Close()

	// Closing is not dropping.
	fast.Close()
	require.Equal(t, storage.WatchStats{Dropped: 1}, b.WatchStats())
}
