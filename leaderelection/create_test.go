package leaderelection_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/leaderelection"
	pbleasev1 "github.com/loomrt/loom/proto/pblease/v1"
	"github.com/loomrt/loom/proto/pbresource"
)

// Two replicas that find no lease both create it (a barrier holds their
// creating Writes until both have sent one, so both read it absent): the
// lease is taken within a second, though the lease duration is the default
// 15 s, and only the replica whose Write created it says so.
func TestFirstElectionOnANewLeaseIsQuick(t *testing.T) {
	s := startService(t)
	creates := newBarrier(2)
	logs := map[string]*testlog.Buffer{"a": {}, "b": {}}
	var rs []*replica
	for _, name := range []string{"a", "b"} {
		rs = append(rs, s.gatedReplica(t, name, hclog.New(&hclog.LoggerOptions{Name: name, Output: logs[name]}), creates.wait))
	}
	watchHolders(t, rs...)
	start := time.Now()
	for _, r := range rs {
		r.start(t)
	}
	waitFor(t, 10*time.Second, "a replica holds the new lease", func() bool { return len(holders(rs...)) == 1 })
	if took := time.Since(start); took >= time.Second {
		t.Errorf("the new lease was taken after %v; want under 1s", took)
	}
	leader := holders(rs...)[0]
	waitFor(t, 10*time.Second, "both replicas see the leader", func() bool {
		return rs[0].Holder() == leader && rs[1].Holder() == leader
	})
	if !creates.passed() {
		t.Fatal("the replicas did not both send a creating Write")
	}
	created := 0
	for name, log := range logs {
		if n := strings.Count(log.String(), "leader lease created"); n > 0 {
			created += n
			t.Logf("%s reported creating the lease", name)
		}
	}
	if created != 1 {
		t.Errorf("%d reports of creating the lease, want 1; logs:\na: %s\nb: %s", created, logs["a"], logs["b"])
	}
	if rec := s.readLease(t); rec.HolderIdentity != leader || rec.LeaseTransitions != 1 {
		t.Fatalf("stored lease = %v, want held by %s after 1 transition", rec, leader)
	}
}

// A creation that lands late, over a lease another replica has taken (here
// a blanket Write of a record without holder, as create sends it), takes
// the lease from its holder at its next renewal but does not make it free:
// neither a replica that saw the holder nor one that starts afterwards takes
// it before a lease duration has passed.
func TestALateCreationDoesNotFreeTheLease(t *testing.T) {
	s := startService(t)
	a := s.startReplica(t, "a")
	waitFor(t, 10*time.Second, "a holds the new lease", a.Held)
	b := s.startReplica(t, "b")
	waitFor(t, 10*time.Second, "b sees a as the holder", func() bool { return b.Holder() == "a" })

	lost := a.Changed()
	data, err := anypb.New(&pbleasev1.Lease{LeaseDuration: durationpb.New(testLeaseDuration), RenewTime: timestamppb.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Write(context.Background(), &pbresource.WriteRequest{
		Resource: &pbresource.Resource{Id: leaseID, Data: data},
	}); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	c := s.startReplica(t, "c")
	rs := []*replica{a, b, c}
	watchHolders(t, rs...)
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not give the lease up")
	}
	waitFor(t, 10*time.Second, "a replica takes the lease again", func() bool { return len(holders(rs...)) == 1 })
	if took := time.Since(written); took < testLeaseDuration-4*testRetryPeriod {
		t.Fatalf("%v took the overwritten lease %v after the late creation; want no sooner than a lease duration (%v)",
			holders(rs...), took, testLeaseDuration)
	}
}

// A replica whose creating Write lands after another replica created the
// lease and took it (the Write overwrites the holder's record) puts the
// holder's record back: the holder keeps the lease through its next
// renewals, and the late replica follows it.
func TestALateCreationPutsTheHoldersRecordBack(t *testing.T) {
	s := startService(t)
	lateSent, earlyHolds := make(chan struct{}), make(chan struct{})
	lateLog := &testlog.Buffer{}
	early := s.gatedReplica(t, "early", hclog.NewNullLogger(), func(ctx context.Context) {
		<-lateSent // so late has read the lease absent
	})
	late := s.gatedReplica(t, "late", hclog.New(&hclog.LoggerOptions{Name: "late", Output: lateLog, Level: hclog.Debug}),
		func(ctx context.Context) {
			close(lateSent)
			select {
			case <-earlyHolds:
			case <-ctx.Done():
			}
		})
	watchHolders(t, early, late)
	early.start(t)
	late.start(t)
	waitFor(t, 10*time.Second, "early holds the new lease", early.Held)
	lost := early.Changed()
	close(earlyHolds)

	waitFor(t, 10*time.Second, "late follows early", func() bool { return late.Holder() == "early" })
	if !strings.Contains(lateLog.String(), "put back the leader lease record") {
		t.Fatalf("late did not put the record back; its log:\n%s", lateLog)
	}
	putBack := time.Now()
	// early's next renewal (a compare-and-swap on the Version it wrote
	// last) finds the record changed but still its own, and carries on.
	waitFor(t, 10*time.Second, "early renews the lease after the put-back", func() bool {
		rec := s.readLease(t)
		return rec.HolderIdentity == "early" && rec.RenewTime.AsTime().After(putBack)
	})
	select {
	case <-lost:
		t.Fatal("early lost the lease")
	default:
	}
	if rec := s.readLease(t); rec.LeaseTransitions != 1 {
		t.Fatalf("stored lease = %v, want 1 transition", rec)
	}
}

// gatedReplica returns a replica with default timings whose creating
// Writes call gate first.
func (s *service) gatedReplica(t *testing.T, name string, logger hclog.Logger, gate func(context.Context)) *replica {
	t.Helper()
	conn := s.dial(t)
	client := gatedCreation{pbresource.NewResourceServiceClient(conn), gate}
	el, err := leaderelection.New(client, leaseID, name, leaderelection.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	return &replica{Elector: el, name: name, conn: conn, done: make(chan error, 1)}
}

// barrier lets calls through once n have arrived.
type barrier struct {
	mu      sync.Mutex
	waiting int
	open    chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{waiting: n, open: make(chan struct{})} }

// wait blocks until n calls have arrived (or ctx ends).
func (b *barrier) wait(ctx context.Context) {
	b.mu.Lock()
	if b.waiting > 0 {
		b.waiting--
		if b.waiting == 0 {
			close(b.open)
		}
	}
	b.mu.Unlock()
	select {
	case <-b.open:
	case <-ctx.Done():
	}
}

func (b *barrier) passed() bool {
	select {
	case <-b.open:
		return true
	default:
		return false
	}
}

// gatedCreation is a client whose Writes without a Version (the Elector's
// creating Writes) call gate first.
type gatedCreation struct {
	pbresource.ResourceServiceClient
	gate func(context.Context)
}

func (c gatedCreation) Write(ctx context.Context, req *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	if req.GetResource().GetVersion() == "" {
		c.gate(ctx)
	}
	return c.ResourceServiceClient.Write(ctx, req, opts...)
}
