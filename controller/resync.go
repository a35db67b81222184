package controller

import (
	"context"
	"hash/maphash"
	"math"
	"slices"
	"time"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/reconcile"
)

// WithResync makes the controller reconcile every resource it manages once
// every period besides its changes, as controller-runtime's SyncPeriod and
// Consul's forceReconcileEvery do: for a controller whose world changes
// outside the resource API. Each resource has its own moment in the period
// (a hash of its name), so the reconciles are spread over the period, never
// queued as a burst; they go in at low priority (see the queue's aging
// bound). Off by default (0).
func (c *Controller) WithResync(period time.Duration) *Controller {
	if period < 0 {
		c.problems = append(c.problems, "WithResync: need a period of 0 (off) or more")
	}
	c.resync = period
	return c
}

// resyncEntry is one managed resource of a resync round and when, in the
// round, its request is queued.
type resyncEntry struct {
	at  time.Duration
	req reconcile.Request
}

// resyncPlan places each resource at a moment of the period drawn from a
// hash of its name with seed, so that a resource keeps its moment from one
// round to the next, and returns them in the order of their moments.
func resyncPlan(reqs []reconcile.Request, seed maphash.Seed, period time.Duration) []resyncEntry {
	plan := make([]resyncEntry, len(reqs))
	for i, req := range reqs {
		frac := float64(maphash.String(seed, req.Key().String())) / math.MaxUint64
		plan[i] = resyncEntry{at: time.Duration(frac * float64(period)), req: req}
	}
	slices.SortFunc(plan, func(a, b resyncEntry) int { return int(a.at - b.at) })
	return plan
}

// resync queues, at Low priority, a request for every managed resource the
// cache holds once per period, each at its moment of the period (see
// resyncPlan), until ctx ends. Resources that appear during a round are
// resynced from the next one; a change reconciles them anyway.
func (s *subscription) resync(ctx context.Context, c *cache.Cache, period time.Duration) {
	seed := maphash.MakeSeed()
	// step is how often a round wakes up, at most: about a thousand times
	// per period, and not more often than every 10 ms.
	step := max(period/1000, 10*time.Millisecond)
	for {
		start := time.Now()
		ids, err := c.IDs(s.c.managedType)
		if err != nil {
			s.logger.Error("listing managed resources to resync", "error", err)
		}
		reqs := make([]reconcile.Request, len(ids))
		for i, id := range ids {
			reqs[i] = reconcile.Request{ID: id}
		}
		plan := resyncPlan(reqs, seed, period)
		for len(plan) > 0 {
			elapsed := time.Since(start)
			for len(plan) > 0 && plan[0].at <= elapsed {
				s.queue.AddPriority(plan[0].req.Key(), plan[0].req, s.low())
				plan = plan[1:]
			}
			if len(plan) > 0 && !sleepCtx(ctx, max(plan[0].at-elapsed, step)) {
				return
			}
		}
		if !sleepCtx(ctx, period-time.Since(start)) {
			return
		}
	}
}

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
