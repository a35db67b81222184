package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller/queue"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// cannedClient answers every write with version (or err).
type cannedClient struct {
	pbresource.ResourceServiceClient
	version string
	err     error
}

func (c *cannedClient) Write(context.Context, *pbresource.WriteRequest, ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	if c.err != nil {
		return nil, c.err
	}
	return &pbresource.WriteResponse{Resource: &pbresource.Resource{Version: c.version}}, nil
}

func (c *cannedClient) WriteStatus(context.Context, *pbresource.WriteStatusRequest, ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	if c.err != nil {
		return nil, c.err
	}
	return &pbresource.WriteStatusResponse{Resource: &pbresource.Resource{Version: c.version}}, nil
}

func (c *cannedClient) Delete(context.Context, *pbresource.DeleteRequest, ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	return &pbresource.DeleteResponse{}, c.err
}

// TestWriteRecorder: per type (any GroupVersion) the newest version
// written; versions that are not numbers, types the cache does not hold
// and Deletes are not waited for; a conflict is an Aborted write that the
// reconcile fails with; what was written since the last take goes with
// the next one.
func TestWriteRecorder(t *testing.T) {
	ctx := context.Background()
	a1 := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "A"}
	a2 := &pbresource.Type{Group: "g", GroupVersion: "v2", Kind: "A"}
	b := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "B"}
	c := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "C"}
	notCached := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "D"}
	cached := cache.New()
	for _, typ := range []*pbresource.Type{a1, b, c} {
		require.NoError(t, cached.AddType(typ))
	}
	appliedA, err := cached.Applied(a1)
	require.NoError(t, err)
	appliedB, err := cached.Applied(b)
	require.NoError(t, err)
	canned := &cannedClient{}
	var r writeRecorder
	r.init(canned, cached)
	write := func(typ *pbresource.Type, version string) {
		canned.version = version
		_, err := r.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: &pbresource.ID{Type: typ}}})
		require.NoError(t, err)
	}
	writeStatus := func(typ *pbresource.Type, version string) {
		canned.version = version
		_, err := r.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: &pbresource.ID{Type: typ}})
		require.NoError(t, err)
	}

	write(a1, "7")
	writeStatus(b, "9")
	writeStatus(a2, "8")
	write(a1, "6")
	write(c, "x") // not a number
	write(notCached, "11")
	canned.version = "10"
	_, err = r.Delete(ctx, &pbresource.DeleteRequest{Id: &pbresource.ID{Type: c}})
	require.NoError(t, err)
	assert.Equal(t, []writtenType{{typ: a1, applied: appliedA, version: 8}, {typ: b, applied: appliedB, version: 9}}, r.take())
	assert.Empty(t, r.take(), "taken: recording starts afresh")
	write(b, "20") // a straggler's write goes with the next take
	assert.Equal(t, []writtenType{{typ: b, applied: appliedB, version: 20}}, r.take())

	aborted := status.Error(codes.Aborted, "version mismatch")
	assert.False(t, r.conflicted(aborted), "no write was refused")
	canned.err = status.Error(codes.InvalidArgument, "bad")
	_, _ = r.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: &pbresource.ID{Type: a1}}})
	assert.False(t, r.conflicted(aborted), "refused, but not as a conflict")
	canned.err = aborted
	_, _ = r.Delete(ctx, &pbresource.DeleteRequest{Id: &pbresource.ID{Type: a1}})
	assert.True(t, r.conflicted(aborted))
	assert.True(t, r.conflicted(wrapErr{aborted}), "wrapped")
	assert.False(t, r.conflicted(status.Error(codes.Unavailable, "down")), "the reconcile failed for another reason")
	assert.Empty(t, r.take(), "a refused write writes no version")
	assert.False(t, r.conflicted(aborted), "a new reconcile starts without")
}

type wrapErr struct{ err error }

func (w wrapErr) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapErr) Unwrap() error { return w.err }

// TestHoldsUnderLoad races gates and holds against the cache catching up
// and against their bound, from several workers, reusing gates and holds
// meanwhile: each key is reconciled, handed back behind a gate and added
// again at once (as the event of its own write would add it, often before
// the cache has applied that write); every key comes back for its second
// round, whether its gate was open, its wait ended or its bound passed
// (for some, which are counted), and nothing races (run it with -race).
func TestHoldsUnderLoad(t *testing.T) {
	typ := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"}
	c := cache.New()
	require.NoError(t, c.AddType(typ))
	applied, err := c.Applied(typ)
	require.NoError(t, err)
	q := queue.New[reconcile.RequestKey, reconcile.Request](queue.Options{})
	timeouts := prometheus.NewCounter(prometheus.CounterOpts{Name: "t"})
	o := &ownWrites{q: q, bound: 2 * time.Millisecond, timeouts: timeouts, logger: hclog.NewNullLogger()}

	const workers, keys, top = 4, 1200, 3000
	versions := make(map[reconcile.RequestKey]uint64, keys)
	for i := 0; i < keys; i++ {
		key := reconcile.RequestKey{Name: fmt.Sprintf("k-%d", i)}
		versions[key] = uint64(1 + i*top/keys)
		q.Add(key, reconcile.Request{})
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := uint64(1); v <= top; v++ {
			applied.Mark(v)
			if v%100 == 0 {
				time.Sleep(time.Millisecond) // let some bounds pass
			}
		}
	}()
	var mu sync.Mutex
	rounds := make(map[reconcile.RequestKey]int, keys)
	var second atomic.Int64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var gs gates
			for {
				item, ok := q.Get()
				if !ok {
					return
				}
				mu.Lock()
				rounds[item.Key]++
				n := rounds[item.Key]
				mu.Unlock()
				if n > 1 {
					q.Done(item)
					second.Add(1)
					continue
				}
				written := []writtenType{{typ: typ, applied: applied, version: versions[item.Key]}}
				o.handBack(item, time.Now(), written, &gs)
				q.Add(item.Key, reconcile.Request{})
			}
		}()
	}
	require.Eventually(t, func() bool { return second.Load() == keys }, 10*time.Second, time.Millisecond,
		"%d of %d keys came back", second.Load(), keys)
	require.Eventually(t, q.Idle, 10*time.Second, time.Millisecond)
	q.ShutDown()
	wg.Wait()
	mu.Lock()
	for key, n := range rounds {
		assert.Equal(t, 2, n, "%s reconciled %d times", key, n)
	}
	mu.Unlock()
	assert.Positive(t, testutil.ToFloat64(timeouts), "some bounds passed")
	o.stop()
}

// countingObserver counts observations.
type countingObserver struct{ n atomic.Int64 }

func (c *countingObserver) Observe(float64) { c.n.Add(1) }
