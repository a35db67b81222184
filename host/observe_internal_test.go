package host

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/observe"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

// heldClient holds every WatchList until release is closed: the Manager's
// cache cannot prime before.
type heldClient struct {
	pbresource.ResourceServiceClient
	release chan struct{}
}

func (c heldClient) WatchList(ctx context.Context, in *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	select {
	case <-c.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c.ResourceServiceClient.WatchList(ctx, in, opts...)
}

// TestReadyzWaitsForPriming: /readyz is 503 naming the cache until the
// Manager's caches are primed, then 200; and 503 naming grpc once the
// server stops serving.
func TestReadyzWaitsForPriming(t *testing.T) {
	registry := resource.NewRegistry()
	if err := foo.RegisterTypes(registry); err != nil {
		t.Fatal(err)
	}
	backend := inmem.New()
	svc := server.New(server.Config{Backend: backend, Registry: registry})
	release := make(chan struct{})
	mgr, url, serving := startReadiness(t, backend, heldClient{server.NewInProcessClient(svc), release})
	get := func() (int, string) { return readyz(t, url) }

	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "cache") {
		t.Fatalf("/readyz before priming = %d %q, want 503 naming the cache", code, body)
	}
	close(release)
	waitCtx, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	if err := mgr.WaitPrimed(waitCtx); err != nil {
		t.Fatalf("the cache did not prime: %v", err)
	}
	if code, body := get(); code != http.StatusOK {
		t.Fatalf("/readyz once primed = %d %q, want 200", code, body)
	}
	serving.Store(false)
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "grpc") {
		t.Fatalf("/readyz once shutting down = %d %q, want 503 naming grpc", code, body)
	}
}

// TestReadyzSaysWhyNotPrimed: while the server refuses the Manager's watch
// for want of a token, /readyz is 503 naming the cache, the type and the
// fix; once a token is accepted, 200.
func TestReadyzSaysWhyNotPrimed(t *testing.T) {
	registry := resource.NewRegistry()
	if err := foo.RegisterTypes(registry); err != nil {
		t.Fatal(err)
	}
	backend := inmem.New()
	var tokenFixed atomic.Bool
	svc := server.New(server.Config{Backend: backend, Registry: registry,
		ACLResolver: func(context.Context) (resource.Authorizer, error) {
			if tokenFixed.Load() {
				return resource.AllowAll, nil
			}
			return nil, status.Error(codes.Unauthenticated, "ACLs are on: send a token")
		}})
	mgr, url, _ := startReadiness(t, backend, server.NewInProcessClient(svc))
	waitCtx, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	if err := mgr.WaitPrimed(waitCtx); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("WaitPrimed = %v, want the server's Unauthenticated", err)
	}
	code, body := readyz(t, url)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the watch refused = %d %q, want 503", code, body)
	}
	for _, want := range []string{"not ready: cache: ", "foo.v1.Bar", "Unauthenticated", "present a token"} {
		if !strings.Contains(body, want) {
			t.Errorf("/readyz body %q lacks %q", body, want)
		}
	}

	tokenFixed.Store(true)
	// An attempt already under way when the token was fixed may still
	// answer with the refusal, which ends a WaitPrimed; the next attempts
	// heal it, as WaitPrimed's doc says, so wait again on a refusal.
	for {
		err := mgr.WaitPrimed(waitCtx)
		if err == nil {
			break
		}
		if status.Code(err) != codes.Unauthenticated || waitCtx.Err() != nil {
			t.Fatalf("the cache did not prime once the token was accepted: %v", err)
		}
	}
	if code, body := readyz(t, url); code != http.StatusOK {
		t.Fatalf("/readyz once primed = %d %q, want 200", code, body)
	}
}

// startReadiness runs a Manager over client with a controller of
// foo.v1.Bar that does nothing, and serves the host's readiness checks of
// it and backend until the test ends. It returns the Manager, the
// server's URL and the flag the gRPC check reads (true).
func startReadiness(t *testing.T, backend storage.Backend, client pbresource.ResourceServiceClient) (*controller.Manager, string, *atomic.Bool) {
	t.Helper()
	mgr, err := controller.NewManager(client, nil, controller.WithWatchRetry(time.Millisecond, 10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	mgr.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	var serving atomic.Bool
	serving.Store(true)
	srv := httptest.NewServer(observe.NewHandler(readiness{serving: &serving, backend: backend, mgr: mgr}.options()...))
	t.Cleanup(srv.Close)
	return mgr, srv.URL, &serving
}

// readyz gets base's /readyz: its status code and body.
func readyz(t *testing.T, base string) (int, string) {
	t.Helper()
	rsp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	b, _ := io.ReadAll(rsp.Body)
	return rsp.StatusCode, string(b)
}

// stallingBackend is a backend whose Reads, while stalled, wait for
// release whatever their context says (the worst a store without quorum
// can do), counting the Reads running at once.
type stallingBackend struct {
	storage.Backend
	stalled       atomic.Bool
	release       chan struct{}
	running, most atomic.Int32
	reads         atomic.Int32
}

func (b *stallingBackend) Read(ctx context.Context, c storage.ReadConsistency, id *pbresource.ID) (*pbresource.Resource, error) {
	b.reads.Add(1)
	n := b.running.Add(1)
	defer b.running.Add(-1)
	for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
	}
	if b.stalled.Load() {
		<-b.release
	}
	return b.Backend.Read(ctx, c, id)
}

// TestReadyzFailsWithinASecondOfAStall: once the store stalls, /readyz
// answers 503 naming the storage within 1 s (Kubernetes' default probe
// timeout), every answer comes within 1 s, and a flood of probes makes one
// read on the store at a time; once the store answers again, 200.
func TestReadyzFailsWithinASecondOfAStall(t *testing.T) {
	registry := resource.NewRegistry()
	if err := foo.RegisterTypes(registry); err != nil {
		t.Fatal(err)
	}
	mem := inmem.New()
	backend := &stallingBackend{Backend: mem, release: make(chan struct{})}
	svc := server.New(server.Config{Backend: mem, Registry: registry})
	mgr, url, _ := startReadiness(t, backend, server.NewInProcessClient(svc))
	waitCtx, cancelWait := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelWait()
	if err := mgr.WaitPrimed(waitCtx); err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(t, url); code != http.StatusOK {
		t.Fatalf("/readyz = %d %q, want 200", code, body)
	}

	backend.stalled.Store(true)
	stalled := time.Now()
	for {
		asked := time.Now()
		code, body := readyz(t, url)
		if took := time.Since(asked); took > time.Second {
			t.Fatalf("/readyz took %v with the store stalled, want at most 1s", took)
		}
		if code == http.StatusServiceUnavailable {
			if !strings.Contains(body, "storage") {
				t.Fatalf("/readyz = 503 %q, want it to name the storage", body)
			}
			t.Logf("/readyz failed %v after the stall: %q", time.Since(stalled), body)
			break
		}
		if time.Since(stalled) > time.Second {
			t.Fatalf("/readyz still %d %q more than 1s after the store stalled", code, body)
		}
	}

	// A flood of probes: one read at a time on the store.
	var flood sync.WaitGroup
	for range 16 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for range 10 {
				if code, body := readyz(t, url); code != http.StatusServiceUnavailable {
					t.Errorf("/readyz with the store stalled = %d %q, want 503", code, body)
				}
			}
		}()
	}
	flood.Wait()
	if most := backend.most.Load(); most > 1 {
		t.Errorf("%d reads on the store at once under a flood of probes, want 1", most)
	}

	backend.stalled.Store(false)
	close(backend.release)
	for deadline := time.Now().Add(10 * time.Second); ; {
		code, body := readyz(t, url)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d %q 10s after the store answered again", code, body)
		}
	}
}
