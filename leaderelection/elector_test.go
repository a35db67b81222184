package leaderelection_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/leaderelection"
	pbleasev1 "github.com/loomrt/loom/proto/pblease/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
)

func TestOneReplicaHoldsTheOtherWaits(t *testing.T) {
	s := startService(t)
	s.writeReleased(t)
	a := s.startReplica(t, "a")
	waitFor(t, 10*time.Second, "a holds the lease", a.Held)
	b := s.startReplica(t, "b")
	watchHolders(t, a, b)
	waitFor(t, 10*time.Second, "b sees a as the holder", func() bool { return b.Holder() == "a" })

	// a keeps renewing: over two lease durations b never takes it.
	until := time.Now().Add(2 * testLeaseDuration)
	for time.Now().Before(until) {
		if got := holders(a, b); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("holders = %v, want only a", got)
		}
		time.Sleep(5 * time.Millisecond) // sampling over a window
	}
	if rec := s.readLease(t); rec.HolderIdentity != "a" || rec.LeaseTransitions != 1 {
		t.Fatalf("stored lease = %v, want held by a after 1 transition", rec)
	}
}

func TestReleaseOnStopHandsOverAtOnce(t *testing.T) {
	s := startService(t)
	s.writeReleased(t)
	a := s.startReplica(t, "a")
	waitFor(t, 10*time.Second, "a holds the lease", a.Held)
	b := s.startReplica(t, "b")
	watchHolders(t, a, b)
	waitFor(t, 10*time.Second, "b sees a as the holder", func() bool { return b.Holder() == "a" })

	changed := a.Changed()
	a.stop(t)
	select {
	case <-changed:
	default:
		t.Fatal("a's Changed did not fire when it stopped")
	}
	if a.Held() {
		t.Fatal("a still holds the lease after Run returned")
	}
	stopped := time.Now()
	// The lease was released, so b takes it on its next attempt, well
	// before the lease duration could have run out.
	waitFor(t, 10*time.Second, "b holds the lease", b.Held)
	if took := time.Since(stopped); took >= testLeaseDuration {
		t.Fatalf("b took %v to take the released lease: as long as an expiry", took)
	}
	if rec := s.readLease(t); rec.HolderIdentity != "b" || rec.LeaseTransitions != 2 {
		t.Fatalf("stored lease = %v, want held by b after 2 transitions", rec)
	}
}

func TestDeadHolderLosesTheLeaseAfterItsDuration(t *testing.T) {
	s := startService(t)
	s.writeReleased(t)
	a := s.startReplica(t, "a")
	waitFor(t, 10*time.Second, "a holds the lease", a.Held)
	b := s.startReplica(t, "b")
	watchHolders(t, a, b)
	waitFor(t, 10*time.Second, "b sees a as the holder", func() bool { return b.Holder() == "a" })

	// Cut a off from the server: it can neither renew nor release.
	lost := a.Changed()
	if err := a.conn.Close(); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not give the lease up when it could not renew")
	}
	gaveUp := time.Since(cut)
	if b.Held() {
		t.Fatal("b held the lease before a's Changed fired")
	}
	waitFor(t, 10*time.Second, "b holds the lease", b.Held)
	took := time.Since(cut)
	// a gives up within its renew deadline of its last renewal, sent
	// before the cut; b takes over no sooner than a lease duration after
	// it saw that renewal, sent at most a retry period (and a round trip)
	// before the cut.
	if max := testRenewDeadline + 250*time.Millisecond; gaveUp > max { // a timer's lateness on a loaded machine
		t.Errorf("a gave the lease up %v after it was cut off; want within the renew deadline (%v)", gaveUp, testRenewDeadline)
	}
	if min := testLeaseDuration - 4*testRetryPeriod; took < min {
		t.Errorf("b took the lease %v after a was cut off; want at least %v (the lease duration less a renewal)", took, min)
	}
	if rec := s.readLease(t); rec.HolderIdentity != "b" {
		t.Fatalf("stored lease = %v, want held by b", rec)
	}
}

func TestConcurrentCampaignsElectExactlyOne(t *testing.T) {
	s := startService(t)
	s.writeReleased(t)
	var rs []*replica
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		rs = append(rs, s.newReplica(t, name))
	}
	watchHolders(t, rs...)
	for _, r := range rs {
		r.start(t)
	}
	waitFor(t, 10*time.Second, "a replica holds the lease", func() bool { return len(holders(rs...)) == 1 })
	leader := holders(rs...)[0]
	waitFor(t, 10*time.Second, "every replica sees the leader", func() bool {
		for _, r := range rs {
			if r.Holder() != leader {
				return false
			}
		}
		return true
	})
	if rec := s.readLease(t); rec.HolderIdentity != leader || rec.LeaseTransitions != 1 {
		t.Fatalf("stored lease = %v, want held by %s after exactly 1 transition", rec, leader)
	}
}

func TestNewRefusesBadSettings(t *testing.T) {
	s := startService(t)
	for _, tc := range []struct {
		name     string
		id       *pbresource.ID
		identity string
		opts     []leaderelection.Option
	}{
		{"no name", &pbresource.ID{}, "a", nil},
		{"other type", &pbresource.ID{Type: &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Bar"}, Name: "x"}, "a", nil},
		{"no identity", leaseID, "", nil},
		{"deadline not below duration", leaseID, "a", []leaderelection.Option{leaderelection.WithRenewDeadline(20 * time.Second)}},
		{"retry not below deadline", leaseID, "a", []leaderelection.Option{leaderelection.WithRetryPeriod(10 * time.Second)}},
		{"no retry period", leaseID, "a", []leaderelection.Option{leaderelection.WithRetryPeriod(0)}},
	} {
		if _, err := leaderelection.New(s.client, tc.id, tc.identity, tc.opts...); err == nil {
			t.Errorf("%s: New succeeded", tc.name)
		}
	}
	if _, err := leaderelection.New(s.client, &pbresource.ID{Name: "x"}, "a"); err != nil {
		t.Errorf("New with the defaults: %v", err)
	}
}

// A server that does not know loom.v1.Lease (Consul) makes Run fail, with
// an error that says so, rather than campaign forever.
func TestRunFailsWhenTheServerLacksTheType(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	el, err := leaderelection.New(client, leaseID, "a", fast...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- el.Run(context.Background()) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "loom.v1.Lease") {
			t.Fatalf("Run: %v, want an error naming loom.v1.Lease", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not fail within 10s")
	}
	if el.Held() {
		t.Fatal("Held after a failed Run")
	}
}

// A holder whose lease is changed under it (here by a blanket write of the
// test's) gives it up at its next renewal: its compare-and-swap fails.
func TestHolderGivesUpALeaseChangedUnderIt(t *testing.T) {
	s := startService(t)
	s.writeReleased(t)
	a := s.startReplica(t, "a")
	waitFor(t, 10*time.Second, "a holds the lease", a.Held)

	lost := a.Changed()
	data, err := anypb.New(&pbleasev1.Lease{HolderIdentity: "intruder", LeaseDuration: durationpb.New(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.Write(context.Background(), &pbresource.WriteRequest{
		Resource: &pbresource.Resource{Id: leaseID, Data: data},
	}); err != nil {
		t.Fatal(err)
	}
	changedAt := time.Now()
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not give the lease up")
	}
	if took := time.Since(changedAt); took >= testRenewDeadline {
		t.Errorf("a gave the lease up %v after it changed: at its deadline, not its next renewal", took)
	}
	if a.Held() || a.Holder() != "intruder" {
		t.Fatalf("a: Held %v, Holder %q; want false, intruder", a.Held(), a.Holder())
	}
}

// The others watch the lease: when its holder releases it, one of them
// takes it at once, not at its next attempt a retry period later.
func TestReleaseWakesTheOthers(t *testing.T) {
	s := startService(t)
	s.writeReleased(t)
	slow := []leaderelection.Option{
		leaderelection.WithLeaseDuration(30 * time.Second),
		leaderelection.WithRenewDeadline(20 * time.Second),
		leaderelection.WithRetryPeriod(10 * time.Second),
	}
	a := s.startReplica(t, "a", slow...)
	waitFor(t, 10*time.Second, "a holds the lease", a.Held)
	b := s.startReplica(t, "b", slow...)
	watchHolders(t, a, b)
	waitFor(t, 10*time.Second, "b sees a as the holder", func() bool { return b.Holder() == "a" })

	a.stop(t)
	waitFor(t, 5*time.Second, "b holds the lease (half its retry period)", b.Held)
}
