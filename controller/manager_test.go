package controller_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
)

func TestReconcilesExistingAndNewResources(t *testing.T) {
	svc := startService(t)
	writeBar(t, svc.Client, "before", "x", nil)

	var seen counter
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			seen.inc(req.ID.Name)
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)

	require.Eventually(t, func() bool { return seen.get("before") > 0 }, 5*time.Second, time.Millisecond)
	writeBar(t, svc.Client, "after", "x", nil)
	require.Eventually(t, func() bool { return seen.get("after") > 0 }, 5*time.Second, time.Millisecond)
	_, err := svc.Client.Delete(context.Background(), &pbresource.DeleteRequest{Id: barID("after")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return seen.get("after") > 1 }, 5*time.Second, time.Millisecond, "a deletion is reconciled too")
}

// slowSnapshotClient delays every event of the WatchLists of some types, so
// a framework that did not wait for priming would run mappers and
// reconcilers against a half-filled cache: here the Zip snapshot completes
// well before the Bar snapshot.
type slowSnapshotClient struct {
	pbresource.ResourceServiceClient
	delays map[string]time.Duration
}

func (c slowSnapshotClient) WatchList(ctx context.Context, in *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	stream, err := c.ResourceServiceClient.WatchList(ctx, in, opts...)
	delay, slow := c.delays[in.Type.Kind]
	if err != nil || !slow {
		return stream, err
	}
	return slowStream{ServerStreamingClient: stream, delay: delay}, nil
}

type slowStream struct {
	grpc.ServerStreamingClient[pbresource.WatchEvent]
	delay time.Duration
}

func (s slowStream) Recv() (*pbresource.WatchEvent, error) {
	time.Sleep(s.delay) // simulates a slow network, not a wait for a condition
	return s.ServerStreamingClient.Recv()
}

func TestCacheIsPrimedBeforeMappersAndReconcilers(t *testing.T) {
	svc := startService(t)
	const bars, zips = 50, 20
	for _, n := range names(bars, "bar") {
		writeBar(t, svc.Client, n, "x", nil)
	}
	for _, n := range names(zips, "zip") {
		writeZip(t, svc.Client, n)
	}

	client := slowSnapshotClient{ResourceServiceClient: svc.Client, delays: map[string]time.Duration{
		"Zip": 2 * time.Millisecond,
		"Bar": 5 * time.Millisecond,
	}}
	m := newManager(t, client)
	var early atomic.Int32
	var mapped, reconciled atomic.Int32
	check := func(rt reconcile.Runtime) {
		all, err := rt.Cache.All(foo.BarV1Type)
		if err != nil || len(all) < bars {
			early.Add(1)
		}
		zs, err := rt.Cache.All(foo.ZipType)
		if err != nil || len(zs) < zips {
			early.Add(1)
		}
	}
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithWatch(foo.ZipType, func(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
			check(rt)
			mapped.Add(1)
			return nil, nil
		}).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			check(rt)
			reconciled.Add(1)
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)

	require.Eventually(t, func() bool { return reconciled.Load() >= bars }, 10*time.Second, time.Millisecond)
	writeZip(t, svc.Client, "late")
	require.Eventually(t, func() bool { return mapped.Load() >= 1 }, 10*time.Second, time.Millisecond)
	assert.Zero(t, early.Load(), "a mapper or reconciler ran before the cache was primed")
}

func TestStatusDirtyCheckSettles(t *testing.T) {
	svc := startService(t)
	var writes atomic.Int32
	var reconciles counter
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("status", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			reconciles.inc(req.ID.Name)
			res, err := rt.Cache.GetByID(req.ID)
			if err != nil || res == nil {
				return err
			}
			wrote, err := rt.WriteStatus(ctx, res, "test", &pbresource.Status{
				Conditions: []*pbresource.Condition{{Type: "Accepted", State: pbresource.Condition_STATE_TRUE}},
			})
			if wrote {
				writes.Add(1)
			}
			return err
		})))
	m.SetLeader(true)
	runManager(t, m)

	for _, n := range names(20, "bar") {
		writeBar(t, svc.Client, n, "x", nil)
	}
	// Each Bar gets its status once; the status write causes one more
	// reconcile, which finds nothing to do.
	require.Eventually(t, func() bool { return writes.Load() == 20 && reconciles.total() >= 40 }, 5*time.Second, time.Millisecond)
	settled := reconciles.total()
	// A change to one resource reconciles it (and writes its status, whose
	// ObservedGeneration moved) then settles again, touching nothing else.
	writeBar(t, svc.Client, "bar-0", "changed", nil)
	require.Eventually(t, func() bool { return writes.Load() == 21 && reconciles.get("bar-0") >= 4 }, 5*time.Second, time.Millisecond)
	rsp, err := svc.Client.Read(context.Background(), &pbresource.ReadRequest{Id: barID("bar-1")})
	require.NoError(t, err)
	assert.Len(t, rsp.Resource.Status, 1)
	assert.Equal(t, int32(21), writes.Load(), "no status was written twice")
	assert.LessOrEqual(t, reconciles.total(), settled+2, "only bar-0 was reconciled again")
}

func TestErrorsBackOffAndSuccessResets(t *testing.T) {
	svc := startService(t)
	writeBar(t, svc.Client, "flaky", "x", nil)

	var mu sync.Mutex
	var times []time.Time
	failUntil := 4
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("flaky", foo.BarV1Type).
		WithBackoff(20*time.Millisecond, time.Second).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			mu.Lock()
			defer mu.Unlock()
			times = append(times, time.Now())
			if len(times) <= failUntil {
				return errors.New("not yet")
			}
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)

	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(times) == 5 }, 10*time.Second, time.Millisecond)
	mu.Lock()
	gaps := make([]time.Duration, 0, 4)
	for i := 1; i < len(times); i++ {
		gaps = append(gaps, times[i].Sub(times[i-1]))
	}
	mu.Unlock()
	// 20, 40, 80, 160 ms: each gap at least its backoff.
	for i, g := range gaps {
		want := 20 * time.Millisecond << i
		assert.GreaterOrEqual(t, g, want, "retry %d waited %s", i+1, g)
	}

	// After the success, the next failure starts from the base again.
	mu.Lock()
	failUntil = 6
	mu.Unlock()
	writeBar(t, svc.Client, "flaky", "y", nil)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(times) == 7 }, 10*time.Second, time.Millisecond)
	mu.Lock()
	gap := times[6].Sub(times[5])
	mu.Unlock()
	assert.GreaterOrEqual(t, gap, 20*time.Millisecond)
	assert.Less(t, gap, 150*time.Millisecond, "the backoff was reset by the success")
}

func TestRequeueAfterAndNow(t *testing.T) {
	svc := startService(t)
	writeBar(t, svc.Client, "later", "x", nil)
	writeBar(t, svc.Client, "now", "x", nil)
	var calls counter
	var firstLater time.Time
	var secondLater atomic.Value
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("requeue", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			n := calls.inc(req.ID.Name)
			switch {
			case req.ID.Name == "later" && n == 1:
				firstLater = time.Now()
				return reconcile.RequeueAfter(50 * time.Millisecond)
			case req.ID.Name == "later" && n == 2:
				secondLater.Store(time.Now())
			case req.ID.Name == "now" && n < 3:
				return reconcile.RequeueNow()
			}
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)
	require.Eventually(t, func() bool { return calls.get("later") == 2 && calls.get("now") == 3 && secondLater.Load() != nil }, 5*time.Second, time.Millisecond)
	assert.GreaterOrEqual(t, secondLater.Load().(time.Time).Sub(firstLater), 50*time.Millisecond)
}

func TestPanicsAreRecoveredAndCounted(t *testing.T) {
	svc := startService(t)
	writeBar(t, svc.Client, "boom", "x", nil)
	reg := prometheus.NewRegistry()
	var calls atomic.Int32
	m := newManager(t, svc.Client, controller.WithMetrics(reg))
	m.MustRegister(controller.NewController("panicky", foo.BarV1Type).
		WithBackoff(time.Millisecond, time.Millisecond).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			if calls.Add(1) < 3 {
				panic("kaboom")
			}
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)
	require.Eventually(t, func() bool { return calls.Load() >= 3 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		n, _ := testutil.GatherAndCount(reg, "loom_controller_reconcile_panics_total")
		return n == 1 && counterValue(t, reg, "loom_controller_reconcile_panics_total") == 2
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1.0, counterValue(t, reg, "loom_controller_reconcile_total", "result", "success"))
}

// counterValue sums a counter family, optionally filtered by one label.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, label ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	return counterSum(families, name, label...)
}

// counterSum is the sum of the counters named name in families, or of
// those with the label label[0]=label[1] if label is given.
func counterSum(families []*dto.MetricFamily, name string, label ...string) float64 {
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			if len(label) == 2 {
				for _, l := range m.GetLabel() {
					if l.GetName() == label[0] && l.GetValue() != label[1] {
						continue metrics
					}
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

func TestInitializerRunsFirstAndIsRetried(t *testing.T) {
	svc := startService(t)
	var attempts atomic.Int32
	var initialized atomic.Bool
	var reconciledBeforeInit atomic.Bool
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("init", foo.BarV1Type).
		WithBackoff(time.Millisecond, 10*time.Millisecond).
		WithInitializer(reconcile.InitializeFunc(func(ctx context.Context, rt reconcile.Runtime) error {
			if attempts.Add(1) < 3 {
				return errors.New("not ready")
			}
			writeBar(t, rt.Client, "default", "made-by-init", nil)
			initialized.Store(true)
			return nil
		})).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			if !initialized.Load() {
				reconciledBeforeInit.Store(true)
			}
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)
	require.Eventually(t, func() bool {
		res, _ := m.Cache().GetByID(barID("default"))
		return res != nil
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, int32(3), attempts.Load())
	assert.False(t, reconciledBeforeInit.Load())
}

func TestMisconfigurationFailsAtRegistration(t *testing.T) {
	svc := startService(t)
	m := newManager(t, svc.Client)
	noop := reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })
	mapper := func(context.Context, reconcile.Runtime, *pbresource.Resource) ([]reconcile.Request, error) {
		return nil, nil
	}

	const noReconciler = "controller \"nil-reconciler\" is misconfigured:\n  - no reconciler (use WithReconciler)"
	assert.EqualError(t, m.Register(controller.NewController("nil-reconciler", foo.BarV1Type)), noReconciler)
	assert.PanicsWithError(t, noReconciler, func() {
		m.MustRegister(controller.NewController("nil-reconciler", foo.BarV1Type))
	})
	err := m.Register(controller.NewController("dup-watch", foo.BarV1Type).WithReconciler(noop).
		WithWatch(foo.ZipType, mapper).WithWatch(foo.ZipType, mapper))
	assert.ErrorContains(t, err, `controller "dup-watch"`)
	assert.ErrorContains(t, err, "watched twice")

	err = m.Register(controller.NewController("bad-query", foo.BarV1Type).WithReconciler(noop).
		WithQuery("zips", cache.IndexQuery(foo.ZipType, "by-zap")))
	assert.ErrorContains(t, err, `controller "bad-query"`)
	assert.ErrorContains(t, err, `has no index "by-zap"`)

	err = m.Register(controller.NewController("workers", foo.BarV1Type).WithReconciler(noop).WithConcurrency(0))
	assert.ErrorContains(t, err, "WithConcurrency(0)")

	require.NoError(t, m.Register(controller.NewController("ok", foo.BarV1Type).WithReconciler(noop)))
	assert.ErrorContains(t, m.Register(controller.NewController("ok", foo.BarV1Type).WithReconciler(noop)), "registered twice")
}

func TestConcurrencyNeverRunsOneKeyTwice(t *testing.T) {
	svc := startService(t)
	var inFlight sync.Map
	var overlap atomic.Bool
	var calls atomic.Int32
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("parallel", foo.BarV1Type).
		WithConcurrency(4).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			if _, busy := inFlight.LoadOrStore(req.ID.Name, true); busy {
				overlap.Store(true)
			}
			defer inFlight.Delete(req.ID.Name)
			calls.Add(1)
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)
	for i := 0; i < 30; i++ {
		for _, n := range names(5, "bar") {
			writeBar(t, svc.Client, n, names(30, "v")[i], nil)
		}
	}
	require.Eventually(t, func() bool { return calls.Load() >= 5 }, 5*time.Second, time.Millisecond)
	assert.False(t, overlap.Load())
}
