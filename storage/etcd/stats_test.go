package etcd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/storage"
)

// TestWatchStats: running watches, the changes waiting for them in the
// change feed's ring, and the watches dropped for falling behind. Changes
// reach the feed through etcd asynchronously, so each reading is awaited.
func TestWatchStats(t *testing.T) {
	ctx := testContext(t)
	b := newTestBackend(t, WithWatchLogEvents(2))
	require.Equal(t, storage.WatchStats{}, b.WatchStats())
	waitStats := func(want storage.WatchStats) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, want, b.WatchStats())
		}, 10*time.Second, 5*time.Millisecond)
	}

	fast, err := b.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	slow, err := b.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	ev, err := fast.Next(ctx)
	require.NoError(t, err)
	require.NotNil(t, ev.GetEndOfSnapshot())
	waitStats(storage.WatchStats{Open: 2})

	mustWrite(t, b, newWidget("w0"))
	mustWrite(t, b, newWidget("w1"))
	waitStats(storage.WatchStats{Open: 2, Buffered: 4})

	// fast takes both changes; the ring (2) then drops the first with a
	// third, which slow had not read: its next Next drops it.
	for range 2 {
		_, err = fast.Next(ctx)
		require.NoError(t, err)
	}
	mustWrite(t, b, newWidget("w2"))
	waitStats(storage.WatchStats{Open: 2, Buffered: 1 + 3})
	for {
		if _, err = slow.Next(ctx); err != nil {
			break
		}
	}
	require.ErrorIs(t, err, storage.ErrWatchTooSlow)
	require.Equal(t, storage.WatchStats{Open: 1, Buffered: 1, Dropped: 1}, b.WatchStats())
	slow.Close()

	// Closing is not dropping.
	fast.Close()
	require.Equal(t, storage.WatchStats{Dropped: 1}, b.WatchStats(), "after closing both")
}
