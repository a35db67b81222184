package controller

import (
	"context"
	"sync"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// LeaderState says what a Manager does about its singleton controllers
// now: it runs them (Leading), or it follows another Manager with a cache
// kept current for a fast take-over (FollowingWarm) or without one
// (FollowingCold, see WithWarmStandby).
type LeaderState int

const (
	// FollowingCold: not the leader, and the types only singleton
	// controllers need are not watched.
	FollowingCold LeaderState = iota
	// FollowingWarm: not the leader, with every type watched and cached,
	// ready to reconcile the moment the lease is won.
	FollowingWarm
	// Leading: the lease is held and singleton controllers run.
	Leading
)

// String renders the state as /readyz and the logs show it.
func (s LeaderState) String() string {
	switch s {
	case Leading:
		return "leading"
	case FollowingWarm:
		return "following (warm)"
	default:
		return "following (cold)"
	}
}

// WithWarmStandby says whether a Manager that is not the leader watches
// and caches the types its singleton controllers need, so that it starts
// reconciling from a current cache the moment it wins the lease. On by
// default. Turn it off for followers short of memory: their watches of
// those types then start when they first win the lease (and prime before
// anything reconciles), and stay open afterwards.
//
// Either way a follower runs no singleton controller: no reconcile, no
// mapper, no queue. Types that a PlacementEachServer controller manages or
// watches are always watched. While a cold follower has not led, Primed,
// CheckPrimed and WaitPrimed count its unwatched types as not primed
// (CheckPrimed says why), so WaitPrimed returns only once it has led.
func WithWarmStandby(on bool) ManagerOption {
	return func(m *Manager) error {
		m.cold = !on
		return nil
	}
}

// LeaderState reports whether the Manager leads or follows, and how.
func (m *Manager) LeaderState() LeaderState {
	if m.lease.Held() {
		return Leading
	}
	if len(m.unwatched()) > 0 {
		return FollowingCold
	}
	return FollowingWarm
}

// notWatchedReason says why CheckPrimed names a type a cold follower does
// not watch yet.
const notWatchedReason = "not watched until this Manager leads (warm standby off)"

// unwatched returns the types whose watches wait for the lease (warm
// standby off, and the lease not held since Run started): those that only
// singleton controllers manage or watch. Nil once they are watched.
func (m *Manager) unwatched() map[resource.UnversionedType]bool {
	if !m.cold || isClosed(m.warmed) {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return singletonOnlyTypes(m.controllers)
}

// singletonOnlyTypes returns the types that singleton controllers manage
// or watch and no PlacementEachServer controller does.
func singletonOnlyTypes(controllers []*Controller) map[resource.UnversionedType]bool {
	var out map[resource.UnversionedType]bool
	everywhere := map[resource.UnversionedType]bool{}
	for _, c := range controllers {
		if c.placement == PlacementEachServer {
			for _, t := range c.types() {
				everywhere[resource.UnversionedTypeFrom(t)] = true
			}
		}
	}
	for _, c := range controllers {
		for _, t := range c.types() {
			if key := resource.UnversionedTypeFrom(t); !everywhere[key] {
				if out == nil {
					out = map[resource.UnversionedType]bool{}
				}
				out[key] = true
			}
		}
	}
	return out
}

// startWatches starts the watches of every type in types (each with its
// GroupVersions) now or, for a cold follower, those of its singleton-only
// types once the lease is first held. Each watch goroutine is counted in
// wg.
func (m *Manager) startWatches(ctx context.Context, wg *sync.WaitGroup, types [][]*pbresource.Type, start func([]*pbresource.Type)) {
	var later [][]*pbresource.Type
	deferred := m.unwatched()
	for _, gvs := range types {
		if deferred[resource.UnversionedTypeFrom(gvs[0])] {
			later = append(later, gvs)
			continue
		}
		start(gvs)
	}
	if len(later) == 0 {
		close(m.warmed) // once: a Manager runs once
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if !m.waitLeader(ctx) {
			return
		}
		m.logger.Info("leader lease held; watching the types only singleton controllers need", "types", len(later))
		for _, gvs := range later {
			start(gvs)
		}
		close(m.warmed) // once: a Manager runs once
	}()
}

// waitLeader waits until the lease is held; false if ctx ended first.
func (m *Manager) waitLeader(ctx context.Context) bool {
	for {
		changed := m.lease.Changed()
		if m.lease.Held() {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}
