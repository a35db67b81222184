package queue

import (
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/loomrt/loom/internal/retry"
)

// backoffs keeps one exponential backoff per failing key. It is guarded by
// the Queue's mutex, except none.
type backoffs[K comparable] struct {
	base, max time.Duration
	keys      map[K]*keyBackoff
	// n is len(keys), kept for none.
	n atomic.Int64
}

type keyBackoff struct {
	b        *backoff.ExponentialBackOff
	failures int
}

func (b *backoffs[K]) init(base, max time.Duration) {
	b.base, b.max, b.keys = base, max, make(map[K]*keyBackoff)
}

// none reports, without the Queue's mutex, whether no key is failing. A
// key's failures are recorded and forgotten by whoever processes it, so
// reading a stale count cannot hide that key's own failure.
func (b *backoffs[K]) none() bool { return b.n.Load() == 0 }

// next records a failure of key and returns how long it must wait.
func (b *backoffs[K]) next(key K) time.Duration {
	kb := b.count(key)
	return kb.b.NextBackOff()
}

// count records a failure of key without taking a wait from its backoff:
// the next failure waits the backoff's first delay.
func (b *backoffs[K]) count(key K) *keyBackoff {
	kb, ok := b.keys[key]
	if !ok {
		eb := retry.NewBackOff(b.base, b.max)
		kb = &keyBackoff{b: eb}
		b.keys[key] = kb
		b.n.Store(int64(len(b.keys)))
	}
	kb.failures++
	return kb
}

func (b *backoffs[K]) forget(key K) {
	if _, ok := b.keys[key]; ok {
		delete(b.keys, key)
		b.n.Store(int64(len(b.keys)))
	}
}

func (b *backoffs[K]) failures(key K) int {
	if kb, ok := b.keys[key]; ok {
		return kb.failures
	}
	return 0
}
