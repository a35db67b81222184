package leaderelection_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resourcetest"
)

// managedReplica is a replica running a Manager that follows its Elector,
// with one singleton controller that writes its replica's name into each
// Qux's status.
type managedReplica struct {
	*replica
	reconciles  atomic.Int64
	unheldCalls atomic.Int64 // reconciles while the lease was not held
	stopMgr     context.CancelFunc
	mgrDone     chan error
}

func (s *service) startManaged(t *testing.T, name string) *managedReplica {
	t.Helper()
	r := &managedReplica{replica: s.newReplica(t, name), mgrDone: make(chan error, 1)}
	client := pbresource.NewResourceServiceClient(r.conn)
	mgr, err := controller.NewManager(client, nil, controller.WithLease(r.Elector))
	if err != nil {
		t.Fatal(err)
	}
	mgr.MustRegister(controller.NewController("leader-qux", foo.QuxType).WithReconciler(
		reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			r.reconciles.Add(1)
			if !r.Held() {
				r.unheldCalls.Add(1)
			}
			res, err := rt.Cache.GetByID(req.ID)
			if err != nil || res == nil {
				return err
			}
			_, err = rt.WriteStatus(ctx, res, "leader", &pbresource.Status{Conditions: []*pbresource.Condition{
				{Type: "ReconciledBy", State: pbresource.Condition_STATE_TRUE, Message: name},
			}})
			return err
		})))
	r.start(t)
	ctx, cancel := context.WithCancel(context.Background())
	r.stopMgr = cancel
	go func() { r.mgrDone <- mgr.Run(ctx) }()
	t.Cleanup(func() { r.stopManager(t) })
	return r
}

// stopManager stops the Manager (and so its controllers), then the
// Elector, which releases the lease: the order a replica's main keeps.
func (r *managedReplica) stopManager(t *testing.T) {
	t.Helper()
	r.stopMgr()
	select {
	case err := <-r.mgrDone:
		if err != nil {
			t.Errorf("replica %s: Manager.Run: %v", r.name, err)
		}
		r.mgrDone <- nil // for a second stop
	case <-time.After(10 * time.Second):
		t.Fatalf("replica %s: Manager.Run did not return within 10s", r.name)
	}
	r.stop(t)
}

func TestManagerRunsSingletonsOnlyOnTheLeader(t *testing.T) {
	s := startService(t)
	s.writeReleased(t)
	a := s.startManaged(t, "a")
	waitFor(t, 10*time.Second, "a holds the lease", a.Held)
	b := s.startManaged(t, "b")
	watchHolders(t, a.replica, b.replica)
	waitFor(t, 10*time.Second, "b sees a as the holder", func() bool { return b.Holder() == "a" })

	data, err := anypb.New(&pbfoov1.Qux{Note: "one"})
	if err != nil {
		t.Fatal(err)
	}
	id := &pbresource.ID{Type: foo.QuxType, Name: "q1"}
	if _, err := s.client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}}); err != nil {
		t.Fatal(err)
	}
	rc := resourcetest.NewClient(s.client).WithTimeout(10 * time.Second)
	reconciledBy := func(name string) *pbresource.Condition {
		return &pbresource.Condition{Type: "ReconciledBy", State: pbresource.Condition_STATE_TRUE, Message: name}
	}
	rc.WaitForStatusCondition(t, id, "leader", reconciledBy("a"))
	if n := b.reconciles.Load(); n != 0 {
		t.Fatalf("b, not the leader, reconciled %d times", n)
	}

	// a stops (its Manager first, then its Elector, which releases the
	// lease): b takes over and its controller reconciles what exists.
	a.stopManager(t)
	waitFor(t, 10*time.Second, "b holds the lease", b.Held)
	rc.WaitForStatusCondition(t, id, "leader", reconciledBy("b"))

	for _, r := range []*managedReplica{a, b} {
		if n := r.unheldCalls.Load(); n != 0 {
			t.Errorf("replica %s reconciled %d times without the lease", r.name, n)
		}
	}
}
