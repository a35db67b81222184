package controller

import (
	"context"
	"fmt"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// WaitPrimed blocks until the shared cache holds the first full snapshot
// (up to EndOfSnapshot) of every type the registered controllers manage or
// watch. It does not start anything: call it while Run is running (or
// about to run). With no controllers registered it returns at once.
// Priming does not wait for the lease: a Manager that is not the leader
// primes its cache all the same, unless warm standby is off
// (WithWarmStandby(false)): such a follower watches the types only
// singleton controllers need once it first leads, so WaitPrimed waits for
// that too.
//
// It returns early, with the error CheckPrimed would return, when the
// server refuses a watch of an unprimed type, during the call, with an
// error that retrying alone will not cure: no token or an unknown one
// (Unauthenticated, or Consul's Internal "ACL not found"), a token without
// the right to watch the type (PermissionDenied), or a type the server
// does not serve. The error holds the server's as a *WatchError, whose
// message says what to fix. The Manager keeps retrying in the background
// all the same, with capped backoff (WithWatchRetry), so a token fixed
// later heals it: call WaitPrimed again to wait for that (a refusal from
// before the call does not end it; the next attempt's answer does). When
// ctx ends first, the error wraps ctx's error and names the unprimed types
// with their watches' last failures.
func (m *Manager) WaitPrimed(ctx context.Context) error {
	for {
		err, primed, refused := m.primeState(false)
		if err == nil {
			return nil
		}
		select {
		case <-primed:
		case <-refused:
			if err, _, _ := m.primeState(false); err != nil && err.refused() {
				return err
			}
		case <-ctx.Done():
			if err, _, _ := m.primeState(false); err != nil {
				return fmt.Errorf("waiting for the cache: %w: %w", ctx.Err(), err)
			}
			return nil
		}
	}
}

// Primed reports, without blocking, whether WaitPrimed would return nil at
// once: the shared cache has held a full snapshot of every type the
// registered controllers manage or watch. CheckPrimed also says why not.
func (m *Manager) Primed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.primedLocked()
}

func (m *Manager) primedLocked() bool {
	for _, ch := range m.primed {
		if !isClosed(ch) {
			return false
		}
	}
	return true
}

// CheckPrimed is Primed for a readiness probe: nil once the shared cache
// has held a full snapshot of every type the registered controllers manage
// or watch, else an error naming the types not primed yet and, for those
// whose watch fails (a missing token, a server out of reach), the last
// failure as a *WatchError that says what to fix. A cold follower
// (WithWarmStandby(false)) names the types it does not watch until it
// leads as such. Once a type is primed, a later failure of its watch shows
// in the log and the watch-error metric, not here: the cache still serves
// what it holds.
func (m *Manager) CheckPrimed() error {
	if err, _, _ := m.primeState(false); err != nil {
		return err
	}
	return nil
}

// CheckWatchedPrimed is CheckPrimed without the types a cold follower
// (WithWarmStandby(false)) does not watch until it leads: nil once every
// type the Manager watches now is primed. It suits the readiness of a
// process that serves clients whether or not it leads.
func (m *Manager) CheckWatchedPrimed() error {
	if err, _, _ := m.primeState(true); err != nil {
		return err
	}
	return nil
}

// primeState returns nil when the cache is primed (leaving out the types
// not watched yet, with onlyWatched); else the error CheckPrimed returns,
// a channel that closes when one of the unprimed types primes, and one
// that closes at the next refused watch attempt.
func (m *Manager) primeState(onlyWatched bool) (*notPrimedError, <-chan struct{}, <-chan struct{}) {
	unwatched := m.unwatched()
	m.mu.Lock()
	var unprimed []*pbresource.Type
	var wait chan struct{}
	if !m.primedLocked() {
		for _, gvs := range watchedGroupVersions(m.controllers) {
			key := resource.UnversionedTypeFrom(gvs[0])
			if onlyWatched && unwatched[key] {
				continue
			}
			if ch := m.primed[key]; !isClosed(ch) {
				unprimed = append(unprimed, gvs...)
				if wait == nil {
					wait = ch
				}
			}
		}
	}
	m.mu.Unlock()
	if len(unprimed) == 0 {
		return nil, nil, nil
	}
	err := &notPrimedError{}
	for _, t := range unprimed {
		err.types = append(err.types, resource.TypeString(t))
		if unwatched[resource.UnversionedTypeFrom(t)] {
			err.unwatched = append(err.unwatched, resource.TypeString(t))
		}
	}
	failures, refused := m.health.failures(unprimed)
	err.failures = failures
	return err, wait, refused
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// waitClosed waits until every channel is closed; false if ctx ended first.
func waitClosed(ctx context.Context, chans []chan struct{}) bool {
	for _, ch := range chans {
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
