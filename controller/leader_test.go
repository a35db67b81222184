package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// terms records which manager ran the singleton controller when, to prove
// that two managers never ran it at the same time.
type terms struct {
	mu      sync.Mutex
	running map[string]bool
	overlap bool
	seen    map[string][]string // manager -> names reconciled
	blocked bool
}

func (tr *terms) reconciler(manager string) reconcile.Reconciler {
	return reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
		tr.mu.Lock()
		tr.running[manager] = true
		for other, on := range tr.running {
			if other != manager && on {
				tr.overlap = true
			}
		}
		tr.seen[manager] = append(tr.seen[manager], req.ID.Name)
		tr.mu.Unlock()
		defer func() {
			tr.mu.Lock()
			tr.running[manager] = false
			tr.mu.Unlock()
		}()
		tr.mu.Lock()
		block := req.ID.Name == "block" && !tr.blocked
		tr.blocked = tr.blocked || block
		tr.mu.Unlock()
		if block {
			// Hold the worker until the lease goes: a stopped controller's
			// context is cancelled.
			<-ctx.Done()
		}
		return nil
	})
}

func (tr *terms) saw(manager, name string) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, n := range tr.seen[manager] {
		if n == name {
			return true
		}
	}
	return false
}

func TestSingletonMovesWithTheLease(t *testing.T) {
	svc := startService(t)
	tr := &terms{running: map[string]bool{}, seen: map[string][]string{}}
	a := newManager(t, svc.Client)
	b := newManager(t, svc.Client)
	a.MustRegister(controller.NewController("bar", foo.BarV1Type).WithReconciler(tr.reconciler("a")))
	b.MustRegister(controller.NewController("bar", foo.BarV1Type).WithReconciler(tr.reconciler("b")))
	runManager(t, a)
	runManager(t, b)

	a.SetLeader(true)
	writeBar(t, svc.Client, "block", "x", nil)
	require.Eventually(t, func() bool { return tr.saw("a", "block") }, 5*time.Second, time.Millisecond)

	// Losing the lease cancels a's reconcile; SetLeader(false) returns only
	// once it has stopped.
	a.SetLeader(false)
	tr.mu.Lock()
	assert.False(t, tr.running["a"], "a still running after SetLeader(false) returned")
	tr.mu.Unlock()

	writeBar(t, svc.Client, "while-leaderless", "x", nil)
	b.SetLeader(true)
	require.Eventually(t, func() bool { return tr.saw("b", "while-leaderless") }, 5*time.Second, time.Millisecond)
	writeBar(t, svc.Client, "on-b", "x", nil)
	require.Eventually(t, func() bool { return tr.saw("b", "on-b") }, 5*time.Second, time.Millisecond)
	assert.False(t, tr.saw("a", "while-leaderless"))
	assert.False(t, tr.saw("a", "on-b"))

	// And back again.
	b.SetLeader(false)
	a.SetLeader(true)
	writeBar(t, svc.Client, "back-on-a", "x", nil)
	require.Eventually(t, func() bool { return tr.saw("a", "back-on-a") }, 5*time.Second, time.Millisecond)
	a.SetLeader(false)

	tr.mu.Lock()
	defer tr.mu.Unlock()
	assert.False(t, tr.overlap, "two managers ran the singleton at once")
}

func TestEachServerPlacementIgnoresTheLease(t *testing.T) {
	svc := startService(t)
	tr := &terms{running: map[string]bool{}, seen: map[string][]string{}}
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("everywhere", foo.BarV1Type).
		WithPlacement(controller.PlacementEachServer).
		WithReconciler(tr.reconciler("m")))
	runManager(t, m)
	writeBar(t, svc.Client, "x", "x", nil)
	require.Eventually(t, func() bool { return tr.saw("m", "x") }, 5*time.Second, time.Millisecond)
}
