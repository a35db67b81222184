// Package retry builds the one backoff policy Loom's retry loops share: the
// work queue's per-key requeues, dependency-mapper retries, controller
// initializers, the cache's watch re-opening, upsert's conflict retries,
// and etcd's watch resumption and leader-election campaigns.
package retry

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// NewBackOff returns an exponential backoff that waits base, then doubles up
// to max, without jitter (delays are predictable, as controller authors and
// tests expect) and without ever giving up (a controller retries until it
// succeeds or stops). opts override these choices, e.g. jitter for many
// clients that would otherwise retry in step.
func NewBackOff(base, max time.Duration, opts ...backoff.ExponentialBackOffOpts) *backoff.ExponentialBackOff {
	if max < base {
		max = base
	}
	return backoff.NewExponentialBackOff(append([]backoff.ExponentialBackOffOpts{
		backoff.WithInitialInterval(base),
		backoff.WithMaxInterval(max),
		backoff.WithMultiplier(2),
		backoff.WithRandomizationFactor(0),
		backoff.WithMaxElapsedTime(0),
	}, opts...)...)
}
