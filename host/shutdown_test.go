package host

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
)

// stuckService is a ResourceService whose WatchList sends events until its
// stream breaks and whose Read waits for release (or its context's end).
type stuckService struct {
	pbresource.UnimplementedResourceServiceServer
	release     chan struct{}
	readStarted chan struct{}
	sending     chan struct{} // closed once WatchList has sent an event
	sendOnce    sync.Once
}

func (s *stuckService) Read(ctx context.Context, _ *pbresource.ReadRequest) (*pbresource.ReadResponse, error) {
	close(s.readStarted)
	select {
	case <-s.release:
		return &pbresource.ReadResponse{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *stuckService) WatchList(_ *pbresource.WatchListRequest, stream grpc.ServerStreamingServer[pbresource.WatchEvent]) error {
	ev := &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{
		Resource: &pbresource.Resource{Version: strings.Repeat("v", 1024)},
	}}}
	for {
		if err := stream.Send(ev); err != nil {
			return err
		}
		s.sendOnce.Do(func() { close(s.sending) })
	}
}

// startStuck serves a stuckService and opens a WatchList on it that is never
// read, and a Read that waits for svc.release.
func startStuck(t *testing.T) (gs *grpc.Server, unary *unaryTracker, svc *stuckService, readErr <-chan error) {
	t.Helper()
	svc = &stuckService{release: make(chan struct{}), readStarted: make(chan struct{}), sending: make(chan struct{})}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unary = &unaryTracker{}
	gs = grpc.NewServer(grpc.ChainUnaryInterceptor(unary.intercept))
	pbresource.RegisterResourceServiceServer(gs, svc)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	client := pbresource.NewResourceServiceClient(dial(t, lis.Addr().String()))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := client.WatchList(ctx, &pbresource.WatchListRequest{}); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := client.Read(ctx, &pbresource.ReadRequest{})
		errc <- err
	}()
	for _, c := range []chan struct{}{svc.sending, svc.readStarted} {
		select {
		case <-c:
		case <-time.After(10 * time.Second):
			t.Fatal("the watch or the read did not start within 10s")
		}
	}
	return gs, unary, svc, errc
}

// A unary RPC in flight at shutdown may finish (and its response reach the
// client), even while a stream whose client does not read holds its
// connection open; then the connection is closed without waiting for the
// timeout.
func TestStopGRPCLetsUnaryFinishDespiteStuckStream(t *testing.T) {
	const grace = 100 * time.Millisecond
	gs, unary, svc, readErr := startStuck(t)
	stopped := make(chan struct{})
	go func() {
		stopGRPC(gs, unary, 10*time.Second, grace, hclog.NewNullLogger())
		close(stopped)
	}()
	select {
	case <-stopped:
		t.Fatal("stopGRPC closed the connections while a unary RPC was running")
	case <-time.After(10 * grace): // a window in which it must not happen
	}
	released := time.Now()
	close(svc.release)
	select {
	case err := <-readErr:
		if err != nil {
			t.Fatalf("the Read in flight at shutdown failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Read did not return within 10s of its release")
	}
	select {
	case <-stopped:
		t.Logf("stopped %v after the Read was released", time.Since(released))
	case <-time.After(5 * time.Second):
		t.Fatal("stopGRPC did not stop the server within 5s of the last unary RPC, with a 10s timeout")
	}
}

// A unary RPC that runs past the timeout has its connection closed at the
// timeout.
func TestStopGRPCTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	gs, unary, svc, readErr := startStuck(t)
	defer close(svc.release)
	start := time.Now()
	stopGRPC(gs, unary, timeout, 50*time.Millisecond, hclog.NewNullLogger())
	if took := time.Since(start); took < timeout {
		t.Errorf("stopGRPC returned after %v, before the %v timeout, with a unary RPC running", took, timeout)
	}
	select {
	case err := <-readErr:
		if status.Code(err) != codes.Unavailable {
			t.Errorf("the Read cut off at the timeout got %v, want Unavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Read did not end within 10s of the stop")
	}
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
