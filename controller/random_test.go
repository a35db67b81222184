package controller_test

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// breakingClient ends WatchList streams at random (seeded) points with
// Aborted, as a server does to a watcher it drops.
type breakingClient struct {
	pbresource.ResourceServiceClient
	mu     sync.Mutex
	rng    *rand.Rand
	p      float64
	breaks int
}

func (c *breakingClient) shouldBreak() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rng.Float64() < c.p {
		c.breaks++
		return true
	}
	return false
}

func (c *breakingClient) WatchList(ctx context.Context, in *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.ResourceServiceClient.WatchList(ctx, in, opts...)
	if err != nil {
		cancel()
		return nil, err
	}
	return &breakingStream{ServerStreamingClient: stream, c: c, cancel: cancel}, nil
}

type breakingStream struct {
	grpc.ServerStreamingClient[pbresource.WatchEvent]
	c      *breakingClient
	cancel context.CancelFunc
	broken bool
}

func (s *breakingStream) Recv() (*pbresource.WatchEvent, error) {
	if s.broken || s.c.shouldBreak() {
		s.broken = true
		s.cancel()
		return nil, status.Error(codes.Aborted, "test: stream broken")
	}
	return s.ServerStreamingClient.Recv()
}

// TestRandomizedChurnWithBrokenStreams writes, updates and deletes
// thousands of resources while watch streams break at random, then checks
// that the cache equals the store and that every surviving resource was
// last reconciled at its final generation. Set LOOM_SEED to replay a run.
func TestRandomizedChurnWithBrokenStreams(t *testing.T) {
	seed := int64(20261122)
	if s := os.Getenv("LOOM_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (set LOOM_SEED to replay)", seed)
	rng := rand.New(rand.NewSource(seed))

	svc := startService(t)
	client := &breakingClient{ResourceServiceClient: svc.Client, rng: rand.New(rand.NewSource(seed + 1)), p: 0.002}

	var mu sync.Mutex
	lastSeen := map[string]string{} // name -> generation the last reconcile saw ("" = absent)
	m := newManager(t, client)
	m.MustRegister(controller.NewController("churn", foo.BarV1Type).
		WithConcurrency(2).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			res, err := rt.Cache.GetByID(&pbresource.ID{Type: req.ID.Type, Tenancy: req.ID.Tenancy, Name: req.ID.Name})
			if err != nil {
				return err
			}
			mu.Lock()
			if res == nil {
				lastSeen[req.ID.Name] = ""
			} else {
				lastSeen[req.ID.Name] = res.Generation
			}
			mu.Unlock()
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)

	const ops, keys = 6000, 1500
	for i := 0; i < ops; i++ {
		name := fmt.Sprintf("bar-%d", rng.Intn(keys))
		if rng.Intn(5) == 0 {
			_, err := svc.Client.Delete(context.Background(), &pbresource.DeleteRequest{Id: barID(name)})
			require.NoError(t, err)
			continue
		}
		writeBar(t, svc.Client, name, fmt.Sprintf("v%d", i), nil)
	}

	list, err := svc.Client.List(context.Background(), &pbresource.ListRequest{Type: foo.BarV1Type, Tenancy: barID("x").Tenancy})
	require.NoError(t, err)
	want := map[string]*pbresource.Resource{}
	for _, r := range list.Resources {
		want[r.Id.Name] = r
	}
	var last lastState
	require.Eventually(t, func() bool {
		cached, err := m.Cache().All(foo.BarV1Type)
		if err != nil {
			return false
		}
		if len(cached) != len(want) {
			last.set("cache holds %d resources, store %d", len(cached), len(want))
			return false
		}
		for _, c := range cached {
			w, ok := want[c.Id.Name]
			if !ok || w.Version != c.Version {
				last.set("cache has %s at version %s", c.Id.Name, c.Version)
				return false
			}
		}
		mu.Lock()
		defer mu.Unlock()
		for name, w := range want {
			if lastSeen[name] != w.Generation {
				last.set("%s last reconciled at generation %q, want %q", name, lastSeen[name], w.Generation)
				return false
			}
		}
		for name, gen := range lastSeen {
			if _, ok := want[name]; !ok && gen != "" {
				last.set("%s was deleted but its last reconcile saw generation %q", name, gen)
				return false
			}
		}
		return true
	}, 30*time.Second, 5*time.Millisecond, "never converged: %s", &last)
	client.mu.Lock()
	t.Logf("streams broken: %d", client.breaks)
	require.Greater(t, client.breaks, 0, "the test did not break any stream")
	client.mu.Unlock()
}

// lastState remembers why a convergence check last failed, for the failure
// message.
type lastState struct {
	mu  sync.Mutex
	msg string
}

func (l *lastState) set(format string, args ...any) {
	l.mu.Lock()
	l.msg = fmt.Sprintf(format, args...)
	l.mu.Unlock()
}

func (l *lastState) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msg
}
