package controller_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/dependency"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// registerOrders registers W12's Order and Shipment types.
func registerOrders(reg resource.Registry) error {
	for _, t := range []*pbresource.Type{orderType, shipmentType} {
		if err := resource.Register(reg, resource.Registration[*wrapperspb.StringValue]{Type: t, Scope: resource.ScopeNamespace}); err != nil {
			return err
		}
	}
	return nil
}

func orderID(name string) *pbresource.ID {
	return &pbresource.ID{Type: orderType, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name}
}

func writeOrder(t *testing.T, client pbresource.ResourceServiceClient, name string) *pbresource.Resource {
	t.Helper()
	data, err := anypb.New(wrapperspb.String(name))
	require.NoError(t, err)
	rsp, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: orderID(name), Data: data}})
	require.NoError(t, err)
	return rsp.Resource
}

// gate holds back what a watch stream receives past its snapshot once the
// gate is shut, until it is opened.
type gate struct {
	shut     atomic.Bool
	openOnce sync.Once
	opened   chan struct{}
}

func newGate() *gate { return &gate{opened: make(chan struct{})} }

func (g *gate) close() { g.shut.Store(true) }
func (g *gate) open()  { g.openOnce.Do(func() { close(g.opened) }) }

// laggingClient is a client whose watches of one type lag behind the
// store while its gate is shut: the events they receive meanwhile reach
// the caller only once it opens. Watches of other types keep up.
type laggingClient struct {
	pbresource.ResourceServiceClient
	typ  *pbresource.Type
	gate *gate
}

func (c *laggingClient) WatchList(ctx context.Context, in *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	s, err := c.ResourceServiceClient.WatchList(ctx, in, opts...)
	if err != nil || !resource.EqualUnversionedType(in.Type, c.typ) {
		return s, err
	}
	return &laggingStream{ServerStreamingClient: s, ctx: ctx, gate: c.gate}, nil
}

type laggingStream struct {
	grpc.ServerStreamingClient[pbresource.WatchEvent]
	ctx          context.Context
	gate         *gate
	pastSnapshot bool
}

func (s *laggingStream) Recv() (*pbresource.WatchEvent, error) {
	ev, err := s.ServerStreamingClient.Recv()
	if s.pastSnapshot && s.gate.shut.Load() {
		select {
		case <-s.gate.opened:
		case <-s.ctx.Done():
			return nil, s.ctx.Err()
		}
	}
	if ev.GetEndOfSnapshot() != nil {
		s.pastSnapshot = true
	}
	return ev, err
}

// guideFlow is the guide's reconciler (finalizer, owned Shipment, status),
// counting its calls, with a hook that runs once it has read the Order
// from the cache.
type guideFlow struct {
	calls atomic.Int32
	// read, if set, runs in each reconcile, numbered from 1, after it read
	// the Order; an error fails the reconcile.
	read    func(ctx context.Context, rt reconcile.Runtime, n int32) error
	settled chan struct{} // closed by the first reconcile that writes nothing
	once    sync.Once
	decoded reconcile.Reconciler
}

func newGuideFlow() *guideFlow {
	g := &guideFlow{settled: make(chan struct{})}
	g.decoded = reconcile.AsDecoded(g.reconcile, reconcile.DecodedReadOnly())
	return g
}

func (g *guideFlow) Reconcile(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
	return g.decoded.Reconcile(ctx, rt, req)
}

func (g *guideFlow) reconcile(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, order *resource.Decoded[*wrapperspb.StringValue]) error {
	n := g.calls.Add(1)
	if g.read != nil {
		if err := g.read(ctx, rt, n); err != nil {
			return err
		}
	}
	wrote, err := orderFlow(ctx, rt, order.Resource)
	if err != nil {
		return err
	}
	if !wrote {
		g.once.Do(func() { close(g.settled) })
	}
	return nil
}

// requireOrderDone checks that the Order has its finalizer, its status for
// its current generation and a Shipment it owns.
func requireOrderDone(t *testing.T, client pbresource.ResourceServiceClient, name string) {
	t.Helper()
	ctx := context.Background()
	rsp, err := client.Read(ctx, &pbresource.ReadRequest{Id: orderID(name)})
	require.NoError(t, err)
	order := rsp.Resource
	require.True(t, finalizer.HasFinalizer(order, orderFinalizer))
	require.True(t, resource.EqualStatus(orderStatus(order.Generation), order.Status[orderStatusKey]), "status %v", order.Status)
	owned, err := client.ListByOwner(ctx, &pbresource.ListByOwnerRequest{Owner: order.Id})
	require.NoError(t, err)
	require.Len(t, owned.Resources, 1)
}

// orderEnv is a service with Orders and Shipments whose Manager watches
// Orders through a gate, with its logs and metrics.
type orderEnv struct {
	svc       *resourcetest.Service
	gate      *gate
	conflicts *conflictCounter
	logs      *testlog.Buffer
	reg       *prometheus.Registry
	m         *controller.Manager
}

func newOrderEnv(t *testing.T) *orderEnv {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(registerOrders))
	e := &orderEnv{svc: svc, gate: newGate(), logs: &testlog.Buffer{}, reg: prometheus.NewRegistry()}
	e.conflicts = &conflictCounter{ResourceServiceClient: &laggingClient{ResourceServiceClient: svc.Client, typ: orderType, gate: e.gate}}
	t.Cleanup(e.gate.open) // let the Manager's watches end
	m, err := controller.NewManager(e.conflicts, hclog.New(&hclog.LoggerOptions{Output: e.logs, Level: hclog.Debug}),
		controller.WithMetrics(e.reg), controller.WithWatchRetry(time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)
	m.SetLeader(true)
	e.m = m
	return e
}

// start runs the Manager and waits until its cache is primed.
func (e *orderEnv) start(t *testing.T) context.CancelFunc {
	stop := runManager(t, e.m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, e.m.WaitPrimed(ctx))
	return stop
}

func (e *orderEnv) counter(t *testing.T, name string) float64 {
	return counterValue(t, e.reg, name, "controller", "order")
}

// TestReconcileReadsItsOwnWrites runs the guide's flow for one Order while
// the Manager's watch of Orders lags behind its watch of Shipments: the
// Shipment's event reaches the controller, and queues the Order again,
// before the events of the Order's own finalizer and status writes. With
// read-your-own-writes the next reconcile waits for those and finds
// everything in place; without it ("off"), it reads the Order as it was
// before the first reconcile and fails its write with a conflict, which is
// retried at once (the backoff is a minute here) and logged at debug.
func TestReconcileReadsItsOwnWrites(t *testing.T) {
	t.Run("waits", func(t *testing.T) {
		e := newOrderEnv(t)
		flow := newGuideFlow()
		flow.read = func(_ context.Context, _ reconcile.Runtime, n int32) error {
			if n == 1 {
				e.gate.close() // the Order's writes from now on lag
			}
			return nil
		}
		e.m.MustRegister(controller.NewController("order", orderType).
			WithWatch(shipmentType, dependency.MapOwner).
			WithReconciler(flow).
			WithBackoff(time.Minute, time.Minute).
			WithReadYourWrites(time.Minute))
		e.start(t)
		writeOrder(t, e.svc.Client, "o")

		// The Order is queued again by its Shipment's event (a second add
		// while the first reconcile's key is held) while the Order's own
		// events are held back. Only then do they arrive.
		require.Eventually(t, func() bool { return e.counter(t, "workqueue_adds_total") == 2 }, 10*time.Second, time.Millisecond)
		require.Equal(t, int32(1), flow.calls.Load(), "reconciled again before the cache had the Order's writes")
		e.gate.open()

		select {
		case <-flow.settled:
		case <-time.After(10 * time.Second):
			t.Fatalf("not settled: %d reconciles; logs:\n%s", flow.calls.Load(), e.logs.String())
		}
		requireOrderDone(t, e.svc.Client, "o")
		assert.Equal(t, int32(2), flow.calls.Load(), "one reconcile that writes, one that finds it done")
		assert.Zero(t, e.conflicts.conflicts.Load())
		assert.Zero(t, e.counter(t, "loom_controller_conflicts_total"))
		assert.Zero(t, e.counter(t, "loom_controller_read_your_writes_timeouts_total"))
		assert.NotContains(t, e.logs.String(), "[ERROR]")
	})

	t.Run("off", func(t *testing.T) {
		e := newOrderEnv(t)
		flow := newGuideFlow()
		flow.read = func(ctx context.Context, rt reconcile.Runtime, n int32) error {
			switch n {
			case 1:
				e.gate.close()
			case 2:
				// This reconcile has read the stale Order. Let the cache
				// catch up before it writes, so the retry reads the
				// current one.
				e.gate.open()
				return waitForStatus(ctx, rt, "o")
			}
			return nil
		}
		e.m.MustRegister(controller.NewController("order", orderType).
			WithWatch(shipmentType, dependency.MapOwner).
			WithReconciler(flow).
			WithBackoff(time.Minute, time.Minute).
			WithReadYourWrites(0))
		e.start(t)
		writeOrder(t, e.svc.Client, "o")

		select {
		case <-flow.settled:
		case <-time.After(10 * time.Second):
			t.Fatalf("not settled: %d reconciles; logs:\n%s", flow.calls.Load(), e.logs.String())
		}
		requireOrderDone(t, e.svc.Client, "o")
		assert.Equal(t, int32(3), flow.calls.Load(), "writes; reads a stale Order and conflicts; retried at once, finds it done")
		assert.Equal(t, int64(1), e.conflicts.conflicts.Load())
		assert.Equal(t, 1.0, e.counter(t, "loom_controller_conflicts_total"))
		assert.Equal(t, 1.0, counterValue(t, e.reg, "loom_controller_reconcile_total", "result", "error"), "a conflict is a failed reconcile")
		assert.Zero(t, e.counter(t, "workqueue_retries_total"), "not retried with backoff")
		logs := e.logs.String()
		assert.NotContains(t, logs, "[ERROR]")
		assert.Contains(t, logs, "[DEBUG] order: reconcile hit a write conflict; retrying: controller=order request=default/default/o")
	})
}

// waitForStatus waits until the cache holds the Order called name with
// its status.
func waitForStatus(ctx context.Context, rt reconcile.Runtime, name string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		res, err := rt.Cache.GetByID(orderID(name))
		if err != nil {
			return err
		}
		if res.GetStatus()[orderStatusKey] != nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cache never caught up with %s", name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// reconcileLog records the reconciles of a controller: which resource,
// when each started and ended.
type reconcileLog struct {
	mu      sync.Mutex
	entries []reconcileEntry
}

type reconcileEntry struct {
	name       string
	start, end time.Time
}

func (l *reconcileLog) wrap(fn reconcile.ReconcileFunc) reconcile.ReconcileFunc {
	return func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
		start := time.Now()
		err := fn(ctx, rt, req)
		l.mu.Lock()
		l.entries = append(l.entries, reconcileEntry{name: req.ID.Name, start: start, end: time.Now()})
		l.mu.Unlock()
		return err
	}
}

func (l *reconcileLog) get() []reconcileEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]reconcileEntry(nil), l.entries...)
}

// writeOrderStatus is a reconciler that writes a status on the Order.
func writeOrderStatus(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
	res, err := rt.Cache.GetByID(req.ID)
	if err != nil || res == nil {
		return err
	}
	_, err = rt.WriteStatus(ctx, res, orderStatusKey, orderStatus(res.Generation))
	return err
}

// TestReadYourWritesBound: when the cache never gets what a reconcile
// wrote (the Order's events are held back for good), a key queued again
// meanwhile is reconciled once the bound has passed, which is counted and
// logged at debug; meanwhile the worker reconciles other keys.
func TestReadYourWritesBound(t *testing.T) {
	const bound = time.Second
	e := newOrderEnv(t)
	writeOrder(t, e.svc.Client, "a")
	writeOrder(t, e.svc.Client, "b")
	e.gate.close() // past the snapshot, nothing of the Orders arrives
	var log reconcileLog
	e.m.MustRegister(controller.NewController("order", orderType).
		WithReconciler(log.wrap(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			if err := writeOrderStatus(ctx, rt, req); err != nil {
				return err
			}
			return reconcile.RequeueNow() // queued again while held
		})).
		WithReadYourWrites(bound))
	e.start(t)

	require.Eventually(t, func() bool { return len(log.get()) >= 3 }, 10*time.Second, time.Millisecond)
	entries := log.get()
	first, second, third := entries[0], entries[1], entries[2]
	require.NotEqual(t, first.name, second.name)
	assert.True(t, second.start.Before(first.end.Add(bound)), "the worker went on with %s while %s was held", second.name, first.name)
	assert.Equal(t, first.name, third.name, "the first key, once its bound passed")
	assert.GreaterOrEqual(t, third.start.Sub(first.end), bound)
	assert.GreaterOrEqual(t, e.counter(t, "loom_controller_read_your_writes_timeouts_total"), 1.0)
	assert.Contains(t, e.logs.String(), "[DEBUG] order: the cache has not caught up with what the last reconcile wrote; reconciling again anyway: controller=order request=default/default/"+first.name)
	assert.NotContains(t, e.logs.String(), "[ERROR]")
}

// TestHeldKeysDoNotDelayStop: a Manager stops at once, whatever the keys
// held waiting for the cache.
func TestHeldKeysDoNotDelayStop(t *testing.T) {
	e := newOrderEnv(t)
	writeOrder(t, e.svc.Client, "a")
	e.gate.close()
	var log reconcileLog
	e.m.MustRegister(controller.NewController("order", orderType).
		WithReconciler(log.wrap(writeOrderStatus)).
		WithReadYourWrites(time.Hour))
	stop := e.start(t)
	require.Eventually(t, func() bool { return len(log.get()) == 1 }, 10*time.Second, time.Millisecond)
	start := time.Now()
	stop() // fails the test if Run does not return within 10 s
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Len(t, log.get(), 1)
}

// TestRepeatedConflictsBackOff: a reconcile that keeps failing on a write
// conflict is retried at once the first time, then with the backoff, so
// a cache that never catches up does not spin it.
func TestRepeatedConflictsBackOff(t *testing.T) {
	const base = time.Second
	e := newOrderEnv(t)
	writeOrder(t, e.svc.Client, "a")
	var log reconcileLog
	e.m.MustRegister(controller.NewController("order", orderType).
		WithReconciler(log.wrap(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			res, err := rt.Cache.GetByID(req.ID)
			if err != nil {
				return err
			}
			stale := resource.Clone(res)
			stale.Version = res.Version + "0" // never the stored version
			_, err = rt.Client.Write(ctx, &pbresource.WriteRequest{Resource: stale})
			return fmt.Errorf("writing the order: %w", err)
		})).
		WithBackoff(base, base))
	e.start(t)

	require.Eventually(t, func() bool { return len(log.get()) >= 3 }, 10*time.Second, time.Millisecond)
	entries := log.get()
	assert.Less(t, entries[1].start.Sub(entries[0].end), base, "the first conflict is retried at once")
	assert.GreaterOrEqual(t, entries[2].start.Sub(entries[1].end), base, "the second one backs off")
	assert.GreaterOrEqual(t, e.counter(t, "loom_controller_conflicts_total"), 2.0)
	assert.GreaterOrEqual(t, e.counter(t, "workqueue_retries_total"), 1.0)
	logs := e.logs.String()
	assert.NotContains(t, logs, "[ERROR]")
	assert.True(t, strings.Contains(logs, "at_once=true") && strings.Contains(logs, "at_once=false"), logs)
}
