package controller_test

// Workload W15 of the benchmark plan, failover to first reconcile: three
// Managers elect a leader with package leaderelection on one in-process
// server; the leader dies without releasing the lease; a resource written
// just after must be reconciled by the next leader. Warm followers (the
// default) have the type cached and the resource queued first; cold ones
// (WithWarmStandby(false)) watch and prime only once they win.

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
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/leaderelection"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/inmem"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// w15TTL is the lease duration of W15; the renew deadline and retry period
// keep the proportions of package remote's -lease-ttl (2/3 and 2/15).
const w15TTL = time.Second

// BenchmarkW15 is workload W15: N widgets, three Managers electing on a
// loom.v1.Lease (TTL 1 s), the leader killed (its client fails every call
// from then on, so it cannot release the lease), then one widget written.
// It reports the time from the kill to that widget's reconcile by the new
// leader (kill-to-reconcile-ms), the part of it from the moment the new
// leader held the lease (won-to-reconcile-ms), and the TTL (ttl-ms); warm
// and cold followers in the same run. Budget: warm ≤ TTL + 100 ms.
func BenchmarkW15(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			env := newW15Env(b)
			env.writeWidgets(b, n)
			for _, mode := range []string{"warm", "cold"} {
				b.Run(mode, func(b *testing.B) {
					var kill, won time.Duration
					for i := 0; i < b.N; i++ {
						r := env.failover(b, fmt.Sprintf("w15-%d-%s-%d", n, mode, i), n, mode == "warm")
						kill += r.killToReconcile
						won += r.wonToReconcile
					}
					runs := float64(b.N)
					b.ReportMetric(float64(kill.Microseconds())/1000/runs, "kill-to-reconcile-ms")
					b.ReportMetric(float64(won.Microseconds())/1000/runs, "won-to-reconcile-ms")
					b.ReportMetric(float64(w15TTL.Milliseconds()), "ttl-ms")
				})
			}
		})
	}
}

// TestW15FollowerTakesOver runs W15 small: a follower, warm or cold, takes
// over from a killed leader and reconciles a widget written after the kill
// within TTL + 1 s. A warm one logs "cache primed" once, before the kill: it
// reconciles from the cache it kept, without priming again. A cold one
// logs it once too, after it won.
func TestW15FollowerTakesOver(t *testing.T) {
	const n = 100
	env := newW15Env(t)
	env.writeWidgets(t, n)
	for _, warm := range []bool{true, false} {
		t.Run(fmt.Sprintf("warm=%t", warm), func(t *testing.T) {
			r := env.failover(t, fmt.Sprintf("w15-test-%t", warm), n, warm)
			t.Logf("kill to reconcile %v, of which lease won to reconcile %v", r.killToReconcile, r.wonToReconcile)
			if limit := w15TTL + time.Second; r.killToReconcile > limit {
				t.Errorf("kill to reconcile took %v, want at most %v", r.killToReconcile, limit)
			}
			if got := strings.Count(r.newLeaderLogs, "cache primed"); got != 1 {
				t.Errorf("the new leader logged \"cache primed\" %d times, want once:\n%s", got, r.newLeaderLogs)
			}
			primedBeforeKill := strings.Contains(r.logsAtKill, "cache primed")
			if primedBeforeKill != warm {
				t.Errorf("warm=%t: the new leader had primed before the kill: %t\n%s", warm, primedBeforeKill, r.newLeaderLogs)
			}
		})
	}
}

// w15Env is the server the replicas share, with the widget and lease types.
type w15Env struct {
	writer pbresource.ResourceServiceClient
	round  atomic.Int64
}

func newW15Env(tb testing.TB) *w15Env {
	tb.Helper()
	reg := resource.NewRegistry()
	resource.MustRegister(reg, resource.Registration[*wrapperspb.StringValue]{Type: widgetType, Scope: resource.ScopeNamespace})
	if err := leaderelection.RegisterTypes(reg); err != nil {
		tb.Fatal(err)
	}
	srv := server.New(server.Config{Backend: inmem.New(), Registry: reg})
	return &w15Env{writer: server.NewInProcessClient(srv)}
}

func (e *w15Env) writeWidgets(tb testing.TB, n int) {
	tb.Helper()
	for _, name := range widgetNames(n) {
		e.writeWidget(tb, name)
	}
}

func (e *w15Env) writeWidget(tb testing.TB, name string) {
	tb.Helper()
	data, err := anypb.New(wrapperspb.String("payload-" + name))
	if err != nil {
		tb.Fatal(err)
	}
	req := &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: widgetID(name), Data: data}}
	if _, err := e.writer.Write(context.Background(), req); err != nil {
		tb.Fatal(err)
	}
}

// w15Result is what one failover measured.
type w15Result struct {
	killToReconcile, wonToReconcile time.Duration
	// newLeaderLogs is what the new leader logged by the end; logsAtKill
	// what it had logged at the kill.
	newLeaderLogs, logsAtKill string
}

// failover runs one round: three replicas on the lease named lease, the
// leader reconciles the n widgets, then it is killed and a new widget is
// written; it returns once that widget is reconciled, with every replica
// stopped. A round in which the lease moved before the kill, so that a cold
// follower is cold no more, is run again (at most twice), with a note.
func (e *w15Env) failover(tb testing.TB, lease string, n int, warm bool) w15Result {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		r, ok := e.tryFailover(tb, fmt.Sprintf("%s-%d", lease, attempt), n, warm)
		if ok {
			return r
		}
		if attempt == 3 {
			tb.Fatalf("the lease moved before the kill in %d rounds in a row", attempt)
		}
	}
}

// tryFailover is one attempt of failover; false if the lease moved before
// the kill and so spoiled a cold round.
func (e *w15Env) tryFailover(tb testing.TB, lease string, n int, warm bool) (w15Result, bool) {
	tb.Helper()
	probe := &w15Probe{}
	fresh := fmt.Sprintf("fresh-%d", e.round.Add(1))
	probe.fresh.Store(fresh)
	var replicas []*w15Replica
	for i := 0; i < 3; i++ {
		replicas = append(replicas, startW15Replica(tb, e.writer, lease, fmt.Sprintf("replica-%d", i), warm, probe))
	}
	defer func() {
		for _, r := range replicas {
			r.stop(tb)
		}
	}()
	leader := waitW15Leader(tb, replicas)
	waitFor(tb, time.Minute, "the leader reconciling every widget", func() bool {
		if leader = heldBy(replicas); leader == nil {
			return false
		}
		return leader.reconciles.Load() >= int64(n)
	}, replicas...)
	for _, r := range replicas {
		if r != leader && !r.waitFollowing(tb, warm) {
			tb.Logf("%s led before the kill, so it is not cold (the lease moved while the leader primed); again. Its log:\n%s",
				r.name, r.logs.String())
			return w15Result{}, false
		}
	}
	logsAtKill := map[*w15Replica]string{}
	for _, r := range replicas {
		logsAtKill[r] = r.logs.String()
	}

	killedAt := time.Now()
	leader.kill()
	e.writeWidget(tb, fresh)
	waitFor(tb, w15TTL+time.Minute, "the widget written after the kill reconciled", func() bool { return probe.at.Load() != 0 }, replicas...)
	at := time.Unix(0, probe.at.Load())
	next := probe.by.Load().(*w15Replica)
	if next == leader {
		tb.Fatalf("the killed leader reconciled the widget written after the kill")
	}
	return w15Result{
		killToReconcile: at.Sub(killedAt),
		wonToReconcile:  at.Sub(time.Unix(0, next.wonAt.Load())),
		newLeaderLogs:   next.logs.String(),
		logsAtKill:      logsAtKill[next],
	}, true
}

// w15Probe notes when, and by which replica, the widget named fresh was
// first reconciled.
type w15Probe struct {
	fresh atomic.Value // string
	at    atomic.Int64 // unix nanoseconds; 0 until then
	by    atomic.Value // *w15Replica
}

// w15Replica is one controller process: an Elector and a Manager sharing
// a client that can be killed.
type w15Replica struct {
	name       string
	client     *killableClient
	elector    *leaderelection.Elector
	manager    *controller.Manager
	logs       *testlog.Buffer
	reconciles atomic.Int64
	wonAt      atomic.Int64 // unix nanoseconds when it first held the lease
	cancel     context.CancelFunc
	wg         sync.WaitGroup
}

func startW15Replica(tb testing.TB, client pbresource.ResourceServiceClient, lease, name string, warm bool, probe *w15Probe) *w15Replica {
	tb.Helper()
	r := &w15Replica{name: name, client: newKillableClient(client), logs: &testlog.Buffer{}}
	logger := hclog.New(&hclog.LoggerOptions{Name: name, Output: r.logs, Level: hclog.Info})
	el, err := leaderelection.New(r.client, &pbresource.ID{Name: lease}, name,
		leaderelection.WithLogger(logger.Named("lease")),
		leaderelection.WithLeaseDuration(w15TTL),
		leaderelection.WithRenewDeadline(w15TTL*2/3),
		leaderelection.WithRetryPeriod(w15TTL*2/15))
	if err != nil {
		tb.Fatal(err)
	}
	m, err := controller.NewManager(r.client, logger, controller.WithLease(el),
		controller.WithWarmStandby(warm), controller.WithMetrics(prometheus.NewRegistry()))
	if err != nil {
		tb.Fatal(err)
	}
	m.MustRegister(controller.NewController("widget", widgetType).WithReconciler(r.reconciler(probe)))
	r.elector, r.manager = el, m
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.goRun(func() { _ = m.Run(ctx) })
	r.goRun(func() { _ = el.Run(ctx) })
	r.goRun(func() { r.noteWin(ctx) })
	return r
}

func (r *w15Replica) goRun(f func()) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		f()
	}()
}

// reconciler counts reconciles and notes the fresh widget's; it writes
// nothing, so what is measured is the framework's take-over.
func (r *w15Replica) reconciler(probe *w15Probe) reconcile.Reconciler {
	return reconcile.ReconcileFunc(func(_ context.Context, _ reconcile.Runtime, req reconcile.Request) error {
		r.reconciles.Add(1)
		if req.ID.Name == probe.fresh.Load().(string) && probe.at.CompareAndSwap(0, time.Now().UnixNano()) {
			probe.by.Store(r)
		}
		return nil
	})
}

// noteWin records when the replica first holds the lease.
func (r *w15Replica) noteWin(ctx context.Context) {
	for {
		changed := r.elector.Changed()
		if r.elector.Held() {
			r.wonAt.Store(time.Now().UnixNano())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// waitFollowing waits until a follower is ready for the failover: warm,
// with its cache primed; or cold, with nothing watched (false if it is not,
// having led).
func (r *w15Replica) waitFollowing(tb testing.TB, warm bool) bool {
	tb.Helper()
	if !warm {
		return r.manager.LeaderState() == controller.FollowingCold
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.manager.WaitPrimed(ctx); err != nil {
		tb.Fatalf("%s: %v", r.name, err)
	}
	if s := r.manager.LeaderState(); s != controller.FollowingWarm {
		tb.Fatalf("%s is %s, want following (warm)", r.name, s)
	}
	return true
}

// kill stops the replica as a crash would: every call of its client fails
// from now on (so its Elector cannot release the lease), then its Manager
// and Elector are stopped.
func (r *w15Replica) kill() {
	r.client.kill()
	r.cancel()
}

func (r *w15Replica) stop(tb testing.TB) {
	tb.Helper()
	r.cancel()
	done := make(chan struct{})
	go func() {
		r.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		tb.Fatalf("%s did not stop", r.name)
	}
	r.client.kill()
}

// waitW15Leader returns the replica that holds the lease, once one does.
func waitW15Leader(tb testing.TB, replicas []*w15Replica) *w15Replica {
	tb.Helper()
	var leader *w15Replica
	waitFor(tb, 30*time.Second, "a leader", func() bool {
		leader = heldBy(replicas)
		return leader != nil
	}, replicas...)
	return leader
}

// heldBy returns the replica that holds the lease now, or nil.
func heldBy(replicas []*w15Replica) *w15Replica {
	for _, r := range replicas {
		if r.elector.Held() {
			return r
		}
	}
	return nil
}

// waitFor polls cond until it holds, failing after d with what the
// replicas logged.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool, replicas ...*w15Replica) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			for _, r := range replicas {
				tb.Logf("%s: %s, %d reconciles; its log:\n%s", r.name, r.manager.LeaderState(), r.reconciles.Load(), r.logs.String())
			}
			tb.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
}

// killableClient is a replica's connection to the server: after kill,
// every call fails with Unavailable and every open stream ends, as when
// the process died.
type killableClient struct {
	pbresource.ResourceServiceClient
	dead   context.Context
	killed context.CancelFunc
}

func newKillableClient(c pbresource.ResourceServiceClient) *killableClient {
	dead, killed := context.WithCancel(context.Background())
	return &killableClient{ResourceServiceClient: c, dead: dead, killed: killed}
}

func (k *killableClient) kill() { k.killed() }

// guard returns ctx ended also by the kill, and its release; an error
// once killed.
func (k *killableClient) guard(ctx context.Context) (context.Context, func(), error) {
	if k.dead.Err() != nil {
		return nil, nil, status.Error(codes.Unavailable, "killed")
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(k.dead, cancel)
	return ctx, func() { stop(); cancel() }, nil
}

// guarded makes the call through k's guard: refused once k is killed, and
// cut short by the kill.
func guarded[Req, Rsp any](k *killableClient, ctx context.Context, in Req, opts []grpc.CallOption,
	call func(context.Context, Req, ...grpc.CallOption) (Rsp, error)) (Rsp, error) {
	ctx, done, err := k.guard(ctx)
	if err != nil {
		var zero Rsp
		return zero, err
	}
	defer done()
	return call(ctx, in, opts...)
}

func (k *killableClient) Read(ctx context.Context, in *pbresource.ReadRequest, opts ...grpc.CallOption) (*pbresource.ReadResponse, error) {
	return guarded(k, ctx, in, opts, k.ResourceServiceClient.Read)
}

func (k *killableClient) Write(ctx context.Context, in *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	return guarded(k, ctx, in, opts, k.ResourceServiceClient.Write)
}

func (k *killableClient) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	return guarded(k, ctx, in, opts, k.ResourceServiceClient.WriteStatus)
}

func (k *killableClient) List(ctx context.Context, in *pbresource.ListRequest, opts ...grpc.CallOption) (*pbresource.ListResponse, error) {
	return guarded(k, ctx, in, opts, k.ResourceServiceClient.List)
}

func (k *killableClient) ListByOwner(ctx context.Context, in *pbresource.ListByOwnerRequest, opts ...grpc.CallOption) (*pbresource.ListByOwnerResponse, error) {
	return guarded(k, ctx, in, opts, k.ResourceServiceClient.ListByOwner)
}

func (k *killableClient) Delete(ctx context.Context, in *pbresource.DeleteRequest, opts ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	return guarded(k, ctx, in, opts, k.ResourceServiceClient.Delete)
}

func (k *killableClient) MutateAndValidate(ctx context.Context, in *pbresource.MutateAndValidateRequest, opts ...grpc.CallOption) (*pbresource.MutateAndValidateResponse, error) {
	return guarded(k, ctx, in, opts, k.ResourceServiceClient.MutateAndValidate)
}

// WatchList opens a stream that ends at the kill.
func (k *killableClient) WatchList(ctx context.Context, in *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	ctx, done, err := k.guard(ctx)
	if err != nil {
		return nil, err
	}
	stream, err := k.ResourceServiceClient.WatchList(ctx, in, opts...)
	if err != nil {
		done()
		return nil, err
	}
	context.AfterFunc(ctx, done) // released when the stream's context ends
	return stream, nil
}
