package controller_test

// Workloads W1, W1g and W2 of the benchmark plan: the whole controller path
// (ResourceService on the in-memory backend → WatchList → shared cache →
// queue → reconciler → WriteStatus → back through the watch) measured end to
// end.

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/internal/testkit/benchutil"
	"github.com/loomrt/loom/predicate"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/inmem"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var widgetType = &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"}

const widgetStatusKey = "bench.widget"

// benchEnv is one fresh world: backend, service, and the clients the writer
// and the Manager use.
type benchEnv struct {
	srv *server.Server
	// writer is the in-process client the benchmark writes resources with.
	writer pbresource.ResourceServiceClient
	// ctrl is the client the Manager talks through: the in-process one, or
	// a loopback gRPC connection.
	ctrl pbresource.ResourceServiceClient
	stop func()
}

func newBenchEnv(b *testing.B, overGRPC bool) *benchEnv {
	b.Helper()
	return newBenchEnvWith(b, overGRPC, widgetType)
}

// newBenchEnvWith is newBenchEnv with the given namespace-scoped types,
// whose data are wrapperspb.StringValue.
func newBenchEnvWith(b *testing.B, overGRPC bool, types ...*pbresource.Type) *benchEnv {
	b.Helper()
	reg := resource.NewRegistry()
	for _, t := range types {
		resource.MustRegister(reg, resource.Registration[*wrapperspb.StringValue]{
			Type:  t,
			Scope: resource.ScopeNamespace,
		})
	}
	srv := server.New(server.Config{Backend: inmem.New(), Registry: reg})
	env := &benchEnv{srv: srv, writer: server.NewInProcessClient(srv), stop: func() {}}
	if !overGRPC {
		env.ctrl = env.writer
		return env
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	srv.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	env.ctrl = pbresource.NewResourceServiceClient(conn)
	env.stop = func() {
		_ = conn.Close()
		gs.Stop()
	}
	return env
}

// statusCounter wraps the Manager's client and counts successful status
// writes; done is closed when the count reaches target.
type statusCounter struct {
	pbresource.ResourceServiceClient
	writes  atomic.Int64
	watches atomic.Int64
	target  int64
	done    chan struct{}
}

func (c *statusCounter) WatchList(ctx context.Context, in *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	c.watches.Add(1)
	return c.ResourceServiceClient.WatchList(ctx, in, opts...)
}

func (c *statusCounter) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	rsp, err := c.ResourceServiceClient.WriteStatus(ctx, in, opts...)
	if err == nil && c.writes.Add(1) == c.target {
		close(c.done)
	}
	return rsp, err
}

// widgetReconciler is the W1 reconciler: read the resource from the cache
// (read-only, decoded: reconcile.AsDecoded with DecodedReadOnly), build the
// bench.widget status (Accepted/TRUE for the current generation) and write
// it only if it changed.
type widgetReconciler struct {
	reconciles atomic.Int64
	inFlight   atomic.Int64
	// firsts counts resources reconciled at least once (W2); seen is
	// indexed by the resource's number.
	firsts atomic.Int64
	seen   []atomic.Bool
	// settled counts resources a reconcile found already carrying their
	// status in the cache (so it wrote nothing); current is indexed like
	// seen.
	settled   atomic.Int64
	current   []atomic.Bool
	allOnce   chan struct{}
	failed    atomic.Int64
	lastError atomic.Value
	decoded   reconcile.Reconciler // reconcile, through reconcile.AsDecoded
}

func newWidgetReconciler(names []string) *widgetReconciler {
	r := &widgetReconciler{
		seen:    make([]atomic.Bool, len(names)),
		current: make([]atomic.Bool, len(names)),
		allOnce: make(chan struct{}),
	}
	r.decoded = reconcile.AsDecoded(r.reconcile, reconcile.DecodedReadOnly())
	return r
}

// indexOf returns the number of a resource named by widgetNames, if it is
// one of the n. It parses the name: a map from names to numbers cost the
// harness a lookup per reconcile that missed the CPU cache, counted in W1's
// CPU per resource as if the framework spent it.
func indexOf(name string, n int) (int, bool) {
	num, ok := strings.CutPrefix(name, "widget-")
	i, err := strconv.Atoi(num)
	return i, ok && err == nil && i >= 0 && i < n
}

// Reconcile is the reconciler the Manager runs: the adapter every
// reconciler written against its decoded resource uses, with the cache's
// own copy (the W1 reconciler only reads it).
func (r *widgetReconciler) Reconcile(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
	return r.decoded.Reconcile(ctx, rt, req)
}

func (r *widgetReconciler) reconcile(ctx context.Context, rt reconcile.Runtime, req reconcile.Request, res *resource.Decoded[*wrapperspb.StringValue]) error {
	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	r.reconciles.Add(1)
	i, known := indexOf(req.ID.Name, len(r.seen))
	if known && !r.seen[i].Swap(true) {
		if r.firsts.Add(1) == int64(len(r.seen)) {
			close(r.allOnce)
		}
	}
	wrote, err := rt.WriteStatus(ctx, res.Resource, widgetStatusKey, widgetStatus(res.Resource.Generation))
	if err != nil {
		r.failed.Add(1)
		r.lastError.Store(err.Error())
		return err
	}
	if !wrote && known && !r.current[i].Swap(true) {
		r.settled.Add(1)
	}
	return nil
}

func widgetStatus(generation string) *pbresource.Status {
	return &pbresource.Status{
		ObservedGeneration: generation,
		Conditions: []*pbresource.Condition{{
			Type:  "Accepted",
			State: pbresource.Condition_STATE_TRUE,
		}},
	}
}

// hasWidgetStatus reports whether res carries the W1 status for its current
// generation.
func hasWidgetStatus(res *pbresource.Resource) bool {
	st, ok := res.GetStatus()[widgetStatusKey]
	return ok && resource.EqualStatus(st, widgetStatus(res.GetGeneration()))
}

func widgetID(name string) *pbresource.ID {
	return &pbresource.ID{Type: widgetType, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name}
}

func widgetNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("widget-%d", i)
	}
	return out
}

// widgetWrites builds the write requests up front, so building them is not
// measured.
func widgetWrites(b *testing.B, names []string) []*pbresource.WriteRequest {
	b.Helper()
	out := make([]*pbresource.WriteRequest, len(names))
	for i, n := range names {
		data, err := anypb.New(wrapperspb.String("payload-" + n))
		if err != nil {
			b.Fatal(err)
		}
		out[i] = &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: widgetID(n), Data: data}}
	}
	return out
}

// runningManager is a Manager running in the background.
type runningManager struct {
	m      *controller.Manager
	cancel context.CancelFunc
	done   chan error
}

// startManager runs the W1 controller, with filters on its managed type if
// any are given.
func startManager(b *testing.B, client pbresource.ResourceServiceClient, rec reconcile.Reconciler, filters ...predicate.Predicate) *runningManager {
	b.Helper()
	return startManagerWith(b, client, rec, func(c *controller.Controller) {
		if len(filters) > 0 {
			c.WithEventFilter(widgetType, filters...)
		}
	})
}

// startManagerWith runs the W1 controller, declared further by declare.
func startManagerWith(b *testing.B, client pbresource.ResourceServiceClient, rec reconcile.Reconciler, declare func(*controller.Controller)) *runningManager {
	b.Helper()
	m, err := controller.NewManager(client, nil, controller.WithMetrics(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	c := controller.NewController("widget", widgetType).WithReconciler(rec)
	declare(c)
	m.MustRegister(c)
	m.SetLeader(true)
	ctx, cancel := context.WithCancel(context.Background())
	rm := &runningManager{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { rm.done <- m.Run(ctx) }()
	return rm
}

func (rm *runningManager) waitPrimed(b *testing.B) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rm.m.WaitPrimed(ctx); err != nil {
		b.Fatalf("cache not primed: %v", err)
	}
}

func (rm *runningManager) stop(b *testing.B) {
	b.Helper()
	rm.cancel()
	if err := <-rm.done; err != nil {
		b.Fatal(err)
	}
}

// quiesce waits until no reconcile or status write can still come: every
// resource was reconciled from a cache copy that already had its status
// (so every status write's event reached the cache, and its queue add
// follows at once), no reconcile is in flight, and the reconcile count did
// not move over one more poll (a queued key would have been taken by an
// idle worker meanwhile). It polls cheaply, so it can run inside the
// measured span: the no-op reconciles the status writes trigger are part of
// the workload's CPU cost. With the own-status filter (dropped not nil) those
// reconciles do not happen; there, every resource's status-write event
// having reached the cache and been dropped by the filter takes the place
// of "reconciled from a copy with its status".
func quiesce(b *testing.B, rec *widgetReconciler, n int, dropped *atomic.Int64) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	last := int64(-1)
	for {
		cur := rec.reconciles.Load()
		done := rec.settled.Load() == int64(n)
		if dropped != nil {
			done = dropped.Load() == int64(n)
		}
		if done && rec.inFlight.Load() == 0 && cur == last {
			return
		}
		last = cur
		if time.Now().After(deadline) {
			b.Fatalf("not settled after 5 minutes: %d of %d resources seen with their status, %d reconciles in flight (reconcile errors: %d, last: %v)",
				rec.settled.Load(), n, rec.inFlight.Load(), rec.failed.Load(), rec.lastError.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// verifyStore checks with one List that every resource has the status for
// its current generation.
func verifyStore(b *testing.B, client pbresource.ResourceServiceClient, n int) {
	b.Helper()
	rsp, err := client.List(context.Background(), &pbresource.ListRequest{
		Type:    widgetType,
		Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(rsp.Resources) != n {
		b.Fatalf("listed %d resources, want %d", len(rsp.Resources), n)
	}
	for _, res := range rsp.Resources {
		if !hasWidgetStatus(res) {
			b.Fatalf("%s lacks the status for generation %s: %v", res.Id.Name, res.Generation, res.Status)
		}
	}
}

// BenchmarkW1 is workload W1: end-to-end reconcile of N new resources with
// the Manager on the in-process client. The resources are written through
// the in-process client from one goroutine.
func BenchmarkW1(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchW1(b, n, false, false) })
	}
}

// BenchmarkW1OwnStatus is W1 with the controller's own-status filter
// (predicate.IgnoreOwnStatus on its status key): the event of each status
// write is dropped instead of queuing a reconcile that finds nothing to do.
func BenchmarkW1OwnStatus(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchW1(b, n, false, true) })
	}
}

// BenchmarkW1g is W1 with the Manager talking to the service over a
// loopback gRPC connection (the writer still uses the in-process client, so
// the figure isolates the controller side's transport).
func BenchmarkW1g(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchW1(b, n, true, false) })
	}
}

// benchW1 runs W1; ownStatusFilter adds predicate.IgnoreOwnStatus, wrapped
// to count what it drops (for quiesce).
func benchW1(b *testing.B, n int, overGRPC, ownStatusFilter bool) {
	names := widgetNames(n)
	var wall, cpu time.Duration
	var reconciles, statusWrites int64
	b.ReportAllocs()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		env := newBenchEnv(b, overGRPC)
		writes := widgetWrites(b, names)
		counter := &statusCounter{ResourceServiceClient: env.ctrl, target: int64(n), done: make(chan struct{})}
		rec := newWidgetReconciler(names)
		var filters []predicate.Predicate
		var dropped *atomic.Int64
		if ownStatusFilter {
			dropped = new(atomic.Int64)
			own := predicate.IgnoreOwnStatus(widgetStatusKey)
			filters = append(filters, func(ev cache.Event) bool {
				if own(ev) {
					return true
				}
				dropped.Add(1)
				return false
			})
		}
		rm := startManager(b, counter, rec, filters...)
		rm.waitPrimed(b)
		runtime.GC()

		// Wall time: from the first write until the N-th status write has
		// returned (then every resource has its status, as checked below).
		// CPU time: until the controller has settled, so the no-op
		// reconciles the status writes trigger are counted too.
		b.StartTimer()
		span := benchutil.Start()
		start := time.Now()
		ctx := context.Background()
		for _, w := range writes {
			if _, err := env.writer.Write(ctx, w); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-counter.done:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d status writes after 5 minutes (reconcile errors: %d, last: %v)",
				counter.writes.Load(), n, rec.failed.Load(), rec.lastError.Load())
		}
		wall += time.Since(start)
		quiesce(b, rec, n, dropped)
		r := span.Stop()
		b.StopTimer()

		verifyStore(b, env.writer, n)
		if got := counter.writes.Load(); got != int64(n) {
			b.Fatalf("%d status writes for %d resources, want exactly %d", got, n, n)
		}
		if w := counter.watches.Load(); w != 1 {
			b.Logf("the cache opened %d watch streams (a broken stream re-primes, which distorts the figures)", w)
		}
		cpu += r.CPU
		reconciles += rec.reconciles.Load()
		statusWrites += counter.writes.Load()
		rm.stop(b)
		env.stop()
	}
	runs := float64(b.N)
	b.ReportMetric(float64(n)*runs/wall.Seconds(), "res/s")
	b.ReportMetric(float64(cpu.Microseconds())/(float64(n)*runs), "cpu-us/res")
	b.ReportMetric(float64(reconciles)/runs, "reconciles")
	b.ReportMetric(float64(statusWrites)/runs, "status-writes")
}

// BenchmarkW2 is workload W2: N resources are stored before the Manager
// starts; it measures the time from Run until the cache is primed
// (s-primed) and until every resource was reconciled once (s-reconciled),
// with the W1 reconciler (which writes a status, so the reconciles compete
// with the events of those writes). Then, with everything settled, it
// measures what the Manager retains per cached resource after GC
// (B/res-heap: heap with the Manager running minus heap once it is stopped
// and dropped; the cache is most of it) next to the proto.Size of a cached
// resource, status included (B/res-wire).
func BenchmarkW2(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchW2(b, n, false) })
	}
}

// BenchmarkW2g is W2 with the Manager a remote client: its client is a
// grpc.NewClient connection over loopback (insecure credentials), so its
// cache holds the messages a gRPC stream decoded rather than the store's
// own.
func BenchmarkW2g(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchW2(b, n, true) })
	}
}

func benchW2(b *testing.B, n int, overGRPC bool) {
	names := widgetNames(n)
	var primed, reconciled, cpu, primeCPU time.Duration
	var heap, wire float64
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		env := newBenchEnv(b, overGRPC)
		ctx := context.Background()
		for _, w := range widgetWrites(b, names) {
			if _, err := env.writer.Write(ctx, w); err != nil {
				b.Fatal(err)
			}
		}
		rec := newWidgetReconciler(names)
		counter := &statusCounter{ResourceServiceClient: env.ctrl, target: -1}
		runtime.GC()

		b.StartTimer()
		cpuStart := benchutil.CPUTime()
		start := time.Now()
		rm := startManager(b, counter, rec)
		rm.waitPrimed(b)
		primedAt := time.Since(start)
		primeCPU += benchutil.CPUTime() - cpuStart
		select {
		case <-rec.allOnce:
		case <-time.After(5 * time.Minute):
			b.Fatalf("only %d of %d reconciled after 5 minutes", rec.firsts.Load(), n)
		}
		reconciledAt := time.Since(start)
		cpu += benchutil.CPUTime() - cpuStart
		b.StopTimer()
		primed += primedAt
		reconciled += reconciledAt

		// Retained memory, once everything settled: the heap with the
		// Manager running minus the heap once it stopped and was dropped.
		// The store and the benchmark's own bookkeeping (rec, counter) stay
		// alive across both readings.
		quiesce(b, rec, n, nil)
		if got := counter.writes.Load(); got != int64(n) {
			b.Fatalf("%d status writes for %d resources, want exactly %d", got, n, n)
		}
		if w := counter.watches.Load(); w != 1 {
			b.Logf("the cache opened %d watch streams (a broken stream re-primes, which distorts the figures)", w)
		}
		wire += cachedWireSize(b, rm.m) / float64(n)
		with := heapAfterGC()
		rm.stop(b)
		without := heapAfterGC()
		heap += (float64(with) - float64(without)) / float64(n)
		runtime.KeepAlive(rec)
		runtime.KeepAlive(counter)
		env.stop()
	}
	runs := float64(b.N)
	b.ReportMetric(primed.Seconds()/runs, "s-primed")
	b.ReportMetric(reconciled.Seconds()/runs, "s-reconciled")
	b.ReportMetric(float64(cpu.Microseconds())/(float64(n)*runs), "cpu-us/res")
	// CPU time (of the whole process: server and Manager) until primed
	// varies less with the machine's load than s-primed.
	b.ReportMetric(float64(primeCPU.Microseconds())/(float64(n)*runs), "prime-cpu-us/res")
	b.ReportMetric(heap/runs, "B/res-heap")
	b.ReportMetric(wire/runs, "B/res-wire")
}

// cachedWireSize sums proto.Size over the Manager's cached resources.
func cachedWireSize(b *testing.B, m *controller.Manager) float64 {
	b.Helper()
	all, err := m.Cache().All(widgetType)
	if err != nil {
		b.Fatal(err)
	}
	size := 0
	for _, res := range all {
		size += proto.Size(res)
	}
	return float64(size)
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
