package controller_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
)

// fencingLease is a Lease with fencing tokens that the test moves by hand.
type fencingLease struct {
	mu      sync.Mutex
	held    bool
	rev     int64
	changed chan struct{}
}

var (
	_ controller.Lease  = (*fencingLease)(nil)
	_ controller.Fencer = (*fencingLease)(nil)
)

func newFencingLease() *fencingLease { return &fencingLease{changed: make(chan struct{})} }

func (l *fencingLease) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

func (l *fencingLease) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changed
}

func (l *fencingLease) Fence() (string, int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return "/test/leader", l.rev, l.held
}

// set changes the lease to held in term rev and wakes the watchers.
func (l *fencingLease) set(held bool, rev int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held, l.rev = held, rev
	close(l.changed)
	l.changed = make(chan struct{})
}

// fenceRecorder is a client that records the fence metadata of each write.
type fenceRecorder struct {
	pbresource.ResourceServiceClient
	mu     sync.Mutex
	writes map[string][]string // resource name -> fence values, one per write ("" unfenced)
}

func (r *fenceRecorder) record(ctx context.Context, name string) {
	md, _ := metadata.FromOutgoingContext(ctx)
	vals := md.Get(resource.FenceMetadataKey)
	v := ""
	if len(vals) == 1 {
		v = vals[0]
	} else if len(vals) > 1 {
		v = "several"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes[name] = append(r.writes[name], v)
}

func (r *fenceRecorder) Write(ctx context.Context, in *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	r.record(ctx, in.GetResource().GetId().GetName())
	return r.ResourceServiceClient.Write(ctx, in, opts...)
}

func (r *fenceRecorder) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	r.record(ctx, in.GetId().GetName())
	return r.ResourceServiceClient.WriteStatus(ctx, in, opts...)
}

func (r *fenceRecorder) Delete(ctx context.Context, in *pbresource.DeleteRequest, opts ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	r.record(ctx, in.GetId().GetName())
	return r.ResourceServiceClient.Delete(ctx, in, opts...)
}

func (r *fenceRecorder) last(name string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.writes[name]
	if len(w) == 0 {
		return "", false
	}
	return w[len(w)-1], true
}

// TestSingletonWritesAreFenced checks that a singleton controller's writes
// carry the fencing token of the term it runs in, that a new term restarts
// it with the new token, and that each-server controllers do not fence.
func TestSingletonWritesAreFenced(t *testing.T) {
	svc := startService(t)
	rec := &fenceRecorder{ResourceServiceClient: svc.Client, writes: map[string][]string{}}
	lease := newFencingLease()
	logs := &testlog.Buffer{}
	m, err := controller.NewManager(rec, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}),
		controller.WithLease(lease), controller.WithWatchRetry(time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)

	// The singleton mirrors each Bar into a Zip (a write that reaches the
	// service, no-op after the first) with metadata from the caller's
	// context, so a fence already on the context is replaced, not doubled.
	m.MustRegister(controller.NewController("mirror", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			data, err := anypb.New(&pbfoov1.Zip{Zap: req.ID.Name})
			if err != nil {
				return err
			}
			ctx = metadata.AppendToOutgoingContext(ctx, resource.FenceMetadataKey, "1@/stale")
			_, err = rt.Client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: zipID("zip-" + req.ID.Name), Data: data}})
			return err
		})))
	// The each-server controller deletes what does not exist.
	m.MustRegister(controller.NewController("everywhere", foo.BarV1Type).
		WithPlacement(controller.PlacementEachServer).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			_, err := rt.Client.Delete(ctx, &pbresource.DeleteRequest{Id: barID("gone-" + req.ID.Name)})
			return err
		})))
	runManager(t, m)

	waitLast := func(name, want string) {
		t.Helper()
		require.Eventually(t, func() bool { got, ok := rec.last(name); return ok && got == want },
			5*time.Second, time.Millisecond, "last write of %s should carry fence %q", name, want)
	}

	lease.set(true, 7)
	writeBar(t, svc.Client, "a", "x", nil)
	waitLast("zip-a", resource.FormatFence("/test/leader", 7))
	waitLast("gone-a", "")

	// Lost and won again before the Manager looked: a new term. The
	// singleton restarts, re-reconciles every Bar, and fences with the new
	// term.
	lease.set(true, 9)
	waitLast("zip-a", resource.FormatFence("/test/leader", 9))
	writeBar(t, svc.Client, "b", "x", nil)
	waitLast("zip-b", resource.FormatFence("/test/leader", 9))
	waitLast("gone-b", "")

	// Without the lease the singleton stops; the each-server one goes on.
	lease.set(false, 0)
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), "singleton controller stopped: controller=mirror term=9")
	}, 5*time.Second, time.Millisecond, "the singleton should stop; log:\n%s", logs)
	writeBar(t, svc.Client, "c", "x", nil)
	waitLast("gone-c", "")
	_, ok := rec.last("zip-c")
	require.False(t, ok, "the singleton ran without the lease")
}
