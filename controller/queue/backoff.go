package queue

import (
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/loomrt/loom/internal/retry"
)

// backoffs keeps one exponential backoff per failing key. It is guarded by
// the Queue's mutex.
type backoffs[K comparable] struct {
	base, max time.Duration
	keys      map[K]*keyBackoff
}

type keyBackoff struct {
	b        *backoff.ExponentialBackOff
	failures int
}

func newBackoffs[K comparable](base, max time.Duration) backoffs[K] {
	return backoffs[K]{base: base, max: max, keys: make(map[K]*keyBackoff)}
}

// next records a failure of key and returns how long it must wait.
func (b *backoffs[K]) next(key K) time.Duration {
	kb, ok := b.keys[key]
	if !ok {
		eb := retry.NewBackOff(b.base, b.max)
		kb = &keyBackoff{b: eb}
		b.keys[key] = kb
	}
	kb.failures++
	return kb.b.NextBackOff()
}

func (b *backoffs[K]) forget(key K) { delete(b.keys, key) }

func (b *backoffs[K]) failures(key K) int {
	if kb, ok := b.keys[key]; ok {
		return kb.failures
	}
	return 0
}
