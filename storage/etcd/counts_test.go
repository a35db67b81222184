package etcd

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// TestCountsSeeEveryServer: servers share one etcd, and each one's counts
// hold the writes of all (they come from the change feed); after the feed
// fails, the next Stats counts afresh, including what the failed feed
// missed.
func TestCountsSeeEveryServer(t *testing.T) {
	ctx := testContext(t)
	prefix := newPrefix()
	a, other := New(testClient, WithPrefix(prefix)), New(testClient, WithPrefix(prefix))
	requireCounts := func(want ...storage.Count) {
		t.Helper()
		if want == nil {
			want = []storage.Count{}
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err := a.Stats(ctx)
			require.NoError(c, err)
			assert.Equal(c, want, got)
		}, 10*time.Second, 5*time.Millisecond)
	}
	count := func(n, marked int64) storage.Count {
		return storage.Count{Type: widget, Partition: "default", Namespace: "default", Resources: n, Marked: marked}
	}
	requireCounts()

	w1 := mustWrite(t, other, newWidget("w1"))
	mustWrite(t, other, newWidget("w2"))
	marked := proto.Clone(w1).(*pbresource.Resource)
	marked.Metadata[resource.DeletionTimestampKey] = "2026-01-01T00:00:00Z"
	mustWrite(t, other, marked)
	requireCounts(count(2, 1))

	// The feed fails: what it misses is counted by the next Stats.
	// (Cancelled as if etcd had compacted what it needs: it ends failed.)
	f := a.counts.f
	f.cancel()
	<-f.stopped
	require.Error(t, f.err)
	mustWrite(t, other, newWidget("w3"))
	requireCounts(count(3, 1))
	mustWrite(t, other, newWidget("w4"))
	requireCounts(count(4, 1))
}
