package controller

import "context"

// WaitPrimed blocks until the shared cache holds the first full snapshot
// (up to EndOfSnapshot) of every type the registered controllers manage or
// watch, or until ctx ends, returning ctx's error then. It does not start
// anything: call it while Run is running (or about to run). With no
// controllers registered it returns at once. Priming does not wait for the
// lease: a Manager that is not the leader primes its cache all the same.
func (m *Manager) WaitPrimed(ctx context.Context) error {
	m.mu.Lock()
	chans := make([]chan struct{}, 0, len(m.primed))
	for _, ch := range m.primed {
		chans = append(chans, ch)
	}
	m.mu.Unlock()
	if !waitClosed(ctx, chans) {
		return ctx.Err()
	}
	return nil
}

// Primed reports, without blocking, whether WaitPrimed would return at
// once: the shared cache has held a full snapshot of every type the
// registered controllers manage or watch. A readiness probe asks it.
func (m *Manager) Primed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ch := range m.primed {
		select {
		case <-ch:
		default:
			return false
		}
	}
	return true
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
