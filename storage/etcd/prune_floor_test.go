package etcd

import (
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// A name updated again and again is pruned in rounds, each reading the
// name's history from the floor the last one left (past the keys it
// deleted), and a full read every floorUses rounds: after every round the
// name keeps exactly its newest KeepVersions revisions.
func TestPruneFromFloor(t *testing.T) {
	const keep = 3
	b := newTestBackend(t, WithHistory(storage.HistoryLimits{KeepVersions: keep}))
	b.pruneDelay = time.Hour // pruned only when keep updates were counted
	ctx := testContext(t)
	stop, err := b.Start(ctx)
	require.NoError(t, err)
	t.Cleanup(stop)

	stored, err := b.WriteCAS(ctx, benchResource("floor"))
	require.NoError(t, err)
	in := proto.Clone(stored).(*pbresource.Resource)
	var versions []string
	for round := 0; round < 2*floorUses+2; round++ {
		for i := 0; i < keep; i++ {
			in.Generation = ulid.Make().String()
			out, err := b.WriteCAS(ctx, in)
			require.NoError(t, err)
			in.Version = out.Version
			versions = append(versions, out.Version)
		}
		newest := versions[len(versions)-keep:]
		require.Eventually(t, func() bool {
			page, err := b.ListRevisions(ctx, in.Id, storage.RevisionPageRequest{})
			require.NoError(t, err)
			if len(page.Revisions) != keep {
				return false
			}
			for i, r := range page.Revisions {
				require.Equal(t, newest[keep-1-i], r.Version, "round %d: the newest are kept, newest first", round)
			}
			return true
		}, 10*time.Second, 5*time.Millisecond, "round %d", round)
	}
}
