package controller

import (
	"fmt"
	"hash/maphash"
	"testing"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A resync round spreads the resources over the period, each at the same
// moment round after round.
func TestResyncPlanSpreads(t *testing.T) {
	const n, period, buckets = 10000, time.Minute, 20
	reqs := make([]reconcile.Request, n)
	for i := range reqs {
		reqs[i] = reconcile.Request{ID: &pbresource.ID{
			Type:    &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"},
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
			Name:    fmt.Sprintf("r-%d", i),
		}}
	}
	seed := maphash.MakeSeed()
	plan := resyncPlan(reqs, seed, period)
	require.Len(t, plan, n)
	var counts [buckets]int
	for i, e := range plan {
		require.GreaterOrEqual(t, e.at, time.Duration(0))
		require.Less(t, e.at, period)
		if i > 0 {
			require.GreaterOrEqual(t, e.at, plan[i-1].at, "in the order of their moments")
		}
		counts[e.at*buckets/period]++
	}
	for b, c := range counts {
		assert.InDelta(t, n/buckets, c, n/buckets/2, "bucket %d of the period: no burst, no gap", b)
	}

	again := resyncPlan(reqs[:100], seed, period)
	at := map[string]time.Duration{}
	for _, e := range plan {
		at[e.req.Key().String()] = e.at
	}
	for _, e := range again {
		assert.Equal(t, at[e.req.Key().String()], e.at, "a resource keeps its moment")
	}
}
