package controller_test

// Workload W12 of the benchmark plan: the guide's flow for an owner with an
// owned child (finalizer, child, status), end to end in process, counting
// the write conflicts a lagging cache causes and the reconciles per owner.

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/dependency"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/internal/testkit/benchutil"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

var (
	orderType    = &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Order"}
	shipmentType = &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Shipment"}
)

const (
	orderFinalizer = "bench.order/cleanup"
	orderStatusKey = "bench.order"
)

// conflictCounter wraps the Manager's client and counts writes refused
// with Aborted (a compare-and-swap on a stale version).
type conflictCounter struct {
	pbresource.ResourceServiceClient
	conflicts atomic.Int64
}

func (c *conflictCounter) count(err error) error {
	if status.Code(err) == codes.Aborted {
		c.conflicts.Add(1)
	}
	return err
}

func (c *conflictCounter) Write(ctx context.Context, in *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	rsp, err := c.ResourceServiceClient.Write(ctx, in, opts...)
	return rsp, c.count(err)
}

func (c *conflictCounter) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	rsp, err := c.ResourceServiceClient.WriteStatus(ctx, in, opts...)
	return rsp, c.count(err)
}

func (c *conflictCounter) Delete(ctx context.Context, in *pbresource.DeleteRequest, opts ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	rsp, err := c.ResourceServiceClient.Delete(ctx, in, opts...)
	return rsp, c.count(err)
}

// orderReconciler is the guide's flow: make sure the Order carries the
// finalizer (going on with the Order as stored), that it has its Shipment
// (created with the Order as owner), and that its status says so for its
// current generation. A reconcile that finds all three in place writes
// nothing.
type orderReconciler struct {
	reconciles atomic.Int64
	inFlight   atomic.Int64
	// settled counts Orders a reconcile found complete (so it wrote
	// nothing); current is indexed by the Order's number.
	settled atomic.Int64
	current []atomic.Bool
	// settledOne receives the number of each Order when it settles.
	settledOne chan int
	failed     atomic.Int64
	lastError  atomic.Value
	decoded    reconcile.Reconciler
}

func newOrderReconciler(n int) *orderReconciler {
	r := &orderReconciler{current: make([]atomic.Bool, n), settledOne: make(chan int, n)}
	r.decoded = reconcile.AsDecoded(r.reconcile, reconcile.DecodedReadOnly())
	return r
}

// waitSettled waits until a reconcile has found Order i complete.
func (r *orderReconciler) waitSettled(b *testing.B, i int) {
	b.Helper()
	for {
		select {
		case got := <-r.settledOne:
			if got == i {
				return
			}
		case <-time.After(time.Minute):
			b.Fatalf("Order %d not settled after a minute (reconcile errors: %d, last: %v)", i, r.failed.Load(), r.lastError.Load())
		}
	}
}

func (r *orderReconciler) Reconcile(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
	r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	r.reconciles.Add(1)
	err := r.decoded.Reconcile(ctx, rt, req)
	if err != nil {
		r.failed.Add(1)
		r.lastError.Store(err.Error())
	}
	return err
}

func (r *orderReconciler) reconcile(ctx context.Context, rt reconcile.Runtime, req reconcile.Request, order *resource.Decoded[*wrapperspb.StringValue]) error {
	wrote, err := orderFlow(ctx, rt, order.Resource)
	if err != nil {
		return err
	}
	if !wrote {
		if i, ok := indexOf(req.ID.Name, len(r.current)); ok && !r.current[i].Swap(true) {
			r.settled.Add(1)
			r.settledOne <- i
		}
	}
	return nil
}

// orderFlow is the guide's flow on one Order: its finalizer, its owned
// Shipment, its status. It reports whether it wrote anything.
func orderFlow(ctx context.Context, rt reconcile.Runtime, order *pbresource.Resource) (bool, error) {
	res, err := finalizer.EnsureHasFinalizer(ctx, rt, order, orderFinalizer)
	if err != nil {
		return false, err
	}
	wrote := res != order
	shipments, err := rt.Cache.ListIDsReadOnly(shipmentType, cache.OwnerIndex, cache.OwnerKey(res.Id))
	if err != nil {
		return false, err
	}
	if len(shipments) == 0 {
		if err := writeShipment(ctx, rt.Client, res); err != nil {
			return false, err
		}
		wrote = true
	}
	wroteStatus, err := rt.WriteStatus(ctx, res, orderStatusKey, orderStatus(res.Generation))
	return wrote || wroteStatus, err
}

// writeShipment creates the Shipment of order, owned by it, under the
// Order's name (a blanket write: if it exists already, unchanged, the
// write changes nothing).
func writeShipment(ctx context.Context, client pbresource.ResourceServiceClient, order *pbresource.Resource) error {
	data, err := anypb.New(wrapperspb.String("for " + order.Id.Name))
	if err != nil {
		return err
	}
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id:    &pbresource.ID{Type: shipmentType, Tenancy: order.Id.Tenancy, Name: order.Id.Name},
		Owner: order.Id,
		Data:  data,
	}}, resource.ResponseUnread())
	return err
}

func orderStatus(generation string) *pbresource.Status {
	return &pbresource.Status{
		ObservedGeneration: generation,
		Conditions: []*pbresource.Condition{{
			Type:  "Shipped",
			State: pbresource.Condition_STATE_TRUE,
		}},
	}
}

// orderWrites builds the write requests of n Orders (named like W1's
// widgets, so indexOf numbers them) up front.
func orderWrites(b *testing.B, n int) []*pbresource.WriteRequest {
	b.Helper()
	out := make([]*pbresource.WriteRequest, n)
	for i, name := range widgetNames(n) {
		data, err := anypb.New(wrapperspb.String("payload-" + name))
		if err != nil {
			b.Fatal(err)
		}
		id := &pbresource.ID{Type: orderType, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name}
		out[i] = &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}}
	}
	return out
}

// startOrderManager runs the Order controller: it manages Orders and
// watches Shipments, mapped to their owners.
func startOrderManager(b *testing.B, client pbresource.ResourceServiceClient, rec reconcile.Reconciler) *runningManager {
	b.Helper()
	m, err := controller.NewManager(client, nil, controller.WithMetrics(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	m.MustRegister(controller.NewController("order", orderType).
		WithWatch(shipmentType, dependency.MapOwner).
		WithReconciler(rec))
	m.SetLeader(true)
	ctx, cancel := context.WithCancel(context.Background())
	rm := &runningManager{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { rm.done <- m.Run(ctx) }()
	return rm
}

// settleOrders waits until every Order was reconciled from a cache copy
// that had its finalizer, Shipment and status (so every write's event
// had reached the cache), no reconcile is in flight, and the reconcile
// count did not move over one more poll; as quiesce does for W1.
func settleOrders(b *testing.B, rec *orderReconciler, n int) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	last := int64(-1)
	for {
		cur := rec.reconciles.Load()
		if rec.settled.Load() == int64(n) && rec.inFlight.Load() == 0 && cur == last {
			return
		}
		last = cur
		if time.Now().After(deadline) {
			b.Fatalf("not settled after 5 minutes: %d of %d Orders complete, %d reconciles in flight (reconcile errors: %d, last: %v)",
				rec.settled.Load(), n, rec.inFlight.Load(), rec.failed.Load(), rec.lastError.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// verifyOrders checks that every Order has the finalizer, its status for
// its current generation, and a Shipment it owns.
func verifyOrders(b *testing.B, client pbresource.ResourceServiceClient, n int) {
	b.Helper()
	ctx := context.Background()
	ten := &pbresource.Tenancy{Partition: "default", Namespace: "default"}
	orders, err := client.List(ctx, &pbresource.ListRequest{Type: orderType, Tenancy: ten})
	if err != nil {
		b.Fatal(err)
	}
	shipments, err := client.List(ctx, &pbresource.ListRequest{Type: shipmentType, Tenancy: ten})
	if err != nil {
		b.Fatal(err)
	}
	if len(orders.Resources) != n || len(shipments.Resources) != n {
		b.Fatalf("listed %d Orders and %d Shipments, want %d of each", len(orders.Resources), len(shipments.Resources), n)
	}
	owned := make(map[string]bool, n)
	for _, s := range shipments.Resources {
		owned[s.Owner.GetName()+"/"+s.Owner.GetUid()] = true
	}
	for _, o := range orders.Resources {
		st, ok := o.Status[orderStatusKey]
		switch {
		case !finalizer.HasFinalizer(o, orderFinalizer):
			b.Fatalf("%s lacks its finalizer", o.Id.Name)
		case !ok || !resource.EqualStatus(st, orderStatus(o.Generation)):
			b.Fatalf("%s lacks the status for generation %s: %v", o.Id.Name, o.Generation, o.Status)
		case !owned[o.Id.Name+"/"+o.Id.Uid]:
			b.Fatalf("%s has no Shipment", o.Id.Name)
		}
	}
}

// BenchmarkW12 is workload W12: the guide's flow (finalizer, owned child,
// status) for N new Orders written from one goroutine, with the Manager on
// the in-process client. It reports the writes refused as conflicts
// (Aborted) and the reconciles per Order, and the process's CPU time per
// Order until the controller has settled. The Orders are written in one
// burst (n=…), or one at a time, each once the one before has settled
// (paced/n=…), as users create them: then the worker is free when the
// Shipment's event queues the Order again, right after its first
// reconcile, and the Order's own events race the Shipment's. (In a burst
// the Order waits in the queue behind the Orders written after it, and its
// own events have mostly arrived by its turn.)
func BenchmarkW12(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchW12(b, n, false) })
	}
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprintf("paced/n=%d", n), func(b *testing.B) { benchW12(b, n, true) })
	}
}

func benchW12(b *testing.B, n int, paced bool) {
	var wall, cpu time.Duration
	var reconciles, conflicts int64
	b.ReportAllocs()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		env := newBenchEnvWith(b, false, orderType, shipmentType)
		writer := env.writer
		writes := orderWrites(b, n)
		counter := &conflictCounter{ResourceServiceClient: env.ctrl}
		rec := newOrderReconciler(n)
		rm := startOrderManager(b, counter, rec)
		rm.waitPrimed(b)
		runtime.GC()

		b.StartTimer()
		span := benchutil.Start()
		ctx := context.Background()
		for i, w := range writes {
			if _, err := writer.Write(ctx, w); err != nil {
				b.Fatal(err)
			}
			if paced {
				rec.waitSettled(b, i)
			}
		}
		settleOrders(b, rec, n)
		r := span.Stop()
		b.StopTimer()

		verifyOrders(b, writer, n)
		wall += r.Wall
		cpu += r.CPU
		reconciles += rec.reconciles.Load()
		conflicts += counter.conflicts.Load()
		rm.stop(b)
		env.stop()
	}
	owners := float64(n) * float64(b.N)
	b.ReportMetric(owners/wall.Seconds(), "owners/s")
	b.ReportMetric(float64(conflicts)/owners, "conflicts/owner")
	b.ReportMetric(float64(reconciles)/owners, "reconciles/owner")
	b.ReportMetric(float64(cpu.Microseconds())/owners, "cpu-us/owner")
}
