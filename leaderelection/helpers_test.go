package leaderelection_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/leaderelection"
	pbleasev1 "github.com/loomrt/loom/proto/pblease/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
)

// Short timings for tests: a holder renews every retry period, gives the
// lease up a renew deadline after its last renewal, and the others take it
// a lease duration after they saw it change. The renew deadline is long
// enough that a loaded test machine does not miss renewals.
const (
	testLeaseDuration = 3 * time.Second
	testRenewDeadline = 2 * time.Second
	testRetryPeriod   = 25 * time.Millisecond
)

var fast = []leaderelection.Option{
	leaderelection.WithLeaseDuration(testLeaseDuration),
	leaderelection.WithRenewDeadline(testRenewDeadline),
	leaderelection.WithRetryPeriod(testRetryPeriod),
}

// leaseID is the lease resource every test campaigns for.
var leaseID = &pbresource.ID{Type: leaderelection.LeaseType, Name: "test-controllers"}

// service runs a ResourceService with the lease type (and the example
// types) over loopback gRPC; each replica dials its own connection, so a
// test can cut one replica off by closing it.
type service struct {
	addr   string
	client pbresource.ResourceServiceClient // the test's own connection
}

func startService(t *testing.T) *service {
	t.Helper()
	svc := resourcetest.StartService(t, resourcetest.WithTypes(leaderelection.RegisterTypes, foo.RegisterTypes))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(svc.Server.ServerOptions()...)
	svc.Server.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	s := &service{addr: lis.Addr().String()}
	s.client = pbresource.NewResourceServiceClient(s.dial(t))
	return s
}

// dial returns a new connection to the service, closed when the test ends.
func (s *service) dial(t *testing.T) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// writeReleased stores the lease as released, so the first campaign takes
// it at once instead of waiting a lease duration after creating it.
func (s *service) writeReleased(t *testing.T) {
	t.Helper()
	data, err := anypb.New(&pbleasev1.Lease{LeaseDuration: durationpb.New(0)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Write(context.Background(), &pbresource.WriteRequest{
		Resource: &pbresource.Resource{Id: leaseID, Data: data},
	}); err != nil {
		t.Fatal(err)
	}
}

// readLease returns the stored lease record.
func (s *service) readLease(t *testing.T) *pbleasev1.Lease {
	t.Helper()
	rsp, err := s.client.Read(context.Background(), &pbresource.ReadRequest{Id: leaseID})
	if err != nil {
		t.Fatal(err)
	}
	rec := &pbleasev1.Lease{}
	if err := rsp.Resource.Data.UnmarshalTo(rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// replica is one Elector with its own connection, running until stopped.
type replica struct {
	*leaderelection.Elector
	name   string
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan error
}

func (s *service) startReplica(t *testing.T, name string, opts ...leaderelection.Option) *replica {
	t.Helper()
	r := s.newReplica(t, name, opts...)
	r.start(t)
	return r
}

func (s *service) newReplica(t *testing.T, name string, opts ...leaderelection.Option) *replica {
	t.Helper()
	conn := s.dial(t)
	el, err := leaderelection.New(pbresource.NewResourceServiceClient(conn), leaseID, name, append(append([]leaderelection.Option(nil), fast...), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return &replica{Elector: el, name: name, conn: conn, done: make(chan error, 1)}
}

func (r *replica) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
}

// stop ends Run (which releases the lease) and waits for it.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("replica %s: Run: %v", r.name, err)
		}
		r.done <- nil // for a second stop
	case <-time.After(10 * time.Second):
		t.Fatalf("replica %s: Run did not return within 10s of its context ending", r.name)
	}
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}

// watchHolders checks, until the test ends, that no two replicas hold the
// lease at once; it reports the first overlap seen.
func watchHolders(t *testing.T, replicas ...*replica) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			var holders []string
			for _, r := range replicas {
				if r.Held() {
					holders = append(holders, r.name)
				}
			}
			if len(holders) > 1 {
				t.Errorf("replicas %v hold the lease at the same time", holders)
				return
			}
			time.Sleep(time.Millisecond) // sampling, until the test ends
		}
	}()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// holders returns the names of the replicas that hold the lease now.
func holders(replicas ...*replica) []string {
	var out []string
	for _, r := range replicas {
		if r.Held() {
			out = append(out, r.name)
		}
	}
	return out
}
