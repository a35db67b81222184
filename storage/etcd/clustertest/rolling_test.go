//go:build cluster

package clustertest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/dial"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
)

// TestRollingRestart restarts the three servers one at a time, as an
// upgrade does, under a client that knows all three addresses and writes
// and reads all along: no request fails. Each server, on SIGTERM, turns
// /readyz to 503 while it still serves gRPC (the drain), then stops.
func TestRollingRestart(t *testing.T) {
	ports, err := freePorts(6)
	if err != nil {
		t.Fatal(err)
	}
	addrs := make([]serverAddrs, 3)
	var grpcAddrs []string
	for i := range addrs {
		addrs[i] = serverAddrs{grpc: fmt.Sprintf("127.0.0.1:%d", ports[2*i]), http: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])}
		grpcAddrs = append(grpcAddrs, addrs[i].grpc)
	}
	c := startClusterAt(t, addrs)
	for _, s := range c.servers {
		waitReady(t, s, http.StatusOK, 30*time.Second)
	}

	conn, err := dial.Dial(strings.Join(grpcAddrs, ","), dial.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	l := &load{client: pbresource.NewResourceServiceClient(conn)}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.run(ctx)
	}()
	stopLoad := func() {
		cancel()
		wg.Wait()
	}
	defer stopLoad()
	waitOps(t, l, 20)

	for i, s := range c.servers {
		t.Logf("restarting %s", s.node)
		s.signal(syscall.SIGTERM)
		// The drain: not ready at once, while gRPC still serves.
		waitReady(t, s, http.StatusServiceUnavailable, time.Second)
		if !s.exited() {
			rctx, rcancel := context.WithTimeout(consistent(context.Background()), 2*time.Second)
			_, err := s.client.Read(rctx, &pbresource.ReadRequest{Id: barID("roll-00000")})
			rcancel()
			if err != nil && !s.exited() {
				t.Errorf("%s: a Read while draining (readyz already 503): %v", s.node, err)
			}
		}
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop within 30s of SIGTERM", s.node)
		}
		if s.err != nil {
			t.Errorf("%s exited with %v", s.node, s.err)
		}
		c.servers[i] = startLoom(t, c.dir, c.bin, s.node, c.endpoints, addrs[i])
		waitReady(t, c.servers[i], http.StatusOK, 30*time.Second)
		waitOps(t, l, l.done.Load()+20)
	}
	stopLoad()
	failed, first := l.failures()
	t.Logf("%d requests, %d failed", l.done.Load(), failed)
	if failed != 0 {
		t.Fatalf("%d of %d requests failed during the rolling restart; the first: %v", failed, l.done.Load(), first)
	}
}

// load writes a new Bar and reads it back, over and over, counting the
// requests and their failures.
type load struct {
	client pbresource.ResourceServiceClient
	done   atomic.Int64

	mu     sync.Mutex
	failed int
	first  error
}

func (l *load) run(ctx context.Context) {
	for n := 0; ctx.Err() == nil; n++ {
		id := barID(fmt.Sprintf("roll-%05d", n))
		data, err := anypb.New(&pbfoov1.Bar{Baz: "roll"})
		if err != nil {
			l.fail(err)
			return
		}
		l.call(ctx, "write", func(rctx context.Context) error {
			_, err := l.client.Write(rctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}})
			return err
		})
		l.call(ctx, "read", func(rctx context.Context) error {
			_, err := l.client.Read(consistent(rctx), &pbresource.ReadRequest{Id: id})
			return err
		})
		time.Sleep(5 * time.Millisecond) // pacing, not waiting for a condition
	}
}

// call makes one request with a deadline, counting it unless the test is
// stopping.
func (l *load) call(ctx context.Context, what string, op func(context.Context) error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := op(rctx)
	if ctx.Err() != nil {
		return
	}
	l.done.Add(1)
	if err != nil {
		l.fail(fmt.Errorf("%s: %w", what, err))
	}
}

func (l *load) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failed++
	if l.first == nil {
		l.first = err
	}
}

func (l *load) failures() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed, l.first
}

// waitOps waits until the load has made n requests.
func waitOps(t *testing.T, l *load, n int64) {
	t.Helper()
	if err := poll(time.Now().Add(30*time.Second), func() error {
		if got := l.done.Load(); got < n {
			return fmt.Errorf("%d requests made, waiting for %d", got, n)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits until s's /readyz answers code.
func waitReady(t *testing.T, s *loomServer, code int, within time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	if err := poll(time.Now().Add(within), func() error {
		rsp, err := hc.Get("http://" + s.httpAddr + "/readyz")
		if err != nil {
			return err
		}
		rsp.Body.Close()
		if rsp.StatusCode != code {
			return fmt.Errorf("%s: /readyz %d, waiting for %d", s.node, rsp.StatusCode, code)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
