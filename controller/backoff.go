package controller

import (
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/loomrt/loom/controller/queue"
	"github.com/loomrt/loom/internal/retry"
)

// newBackOff returns the backoff of c's retries (mappers, initializer): the
// bounds of WithBackoff, by default queue.DefaultBaseDelay and defaultMax.
func (c *Controller) newBackOff(defaultMax time.Duration) *backoff.ExponentialBackOff {
	return retry.NewBackOff(orDefault(c.baseBackoff, queue.DefaultBaseDelay), orDefault(c.maxBackoff, defaultMax))
}
