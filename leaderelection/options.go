package leaderelection

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// The defaults of client-go's leaderelection.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// Option configures New.
type Option func(*config)

type config struct {
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	logger        hclog.Logger
}

// WithLeaseDuration sets how long the other replicas wait, after they
// last saw the lease change, before they take it from a holder that stopped
// renewing (default 15 s). It bounds failover when a leader dies without
// releasing the lease.
func WithLeaseDuration(d time.Duration) Option {
	return func(c *config) { c.leaseDuration = d }
}

// WithRenewDeadline sets how long the holder keeps the lease without a
// successful renewal before it gives it up itself (default 10 s). It must
// be shorter than the lease duration: the difference is the time its
// singleton controllers have to stop before another replica may start them.
func WithRenewDeadline(d time.Duration) Option {
	return func(c *config) { c.renewDeadline = d }
}

// WithRetryPeriod sets how often the holder renews the lease and the others
// try to take it (default 2 s; the others wait up to a fifth longer, at
// random, so they do not all try at once). It must be shorter than the
// renew deadline, so that a failed renewal is retried before the deadline.
func WithRetryPeriod(d time.Duration) Option {
	return func(c *config) { c.retryPeriod = d }
}

// WithLogger logs changes of leadership and failed calls to logger (by
// default nothing is logged).
func WithLogger(logger hclog.Logger) Option {
	return func(c *config) { c.logger = logger }
}

func newConfig(opts []Option) (config, error) {
	c := config{
		leaseDuration: DefaultLeaseDuration,
		renewDeadline: DefaultRenewDeadline,
		retryPeriod:   DefaultRetryPeriod,
	}
	for _, o := range opts {
		o(&c)
	}
	if c.logger == nil {
		c.logger = hclog.NewNullLogger()
	}
	switch {
	case c.retryPeriod <= 0:
		return c, fmt.Errorf("leaderelection: the retry period must be positive (got %v)", c.retryPeriod)
	case c.renewDeadline <= c.retryPeriod:
		return c, fmt.Errorf("leaderelection: the renew deadline (%v) must be longer than the retry period (%v)", c.renewDeadline, c.retryPeriod)
	case c.leaseDuration <= c.renewDeadline:
		return c, fmt.Errorf("leaderelection: the lease duration (%v) must be longer than the renew deadline (%v)", c.leaseDuration, c.renewDeadline)
	case c.leaseDuration > 24*time.Hour:
		return c, fmt.Errorf("leaderelection: the lease duration (%v) must be at most 24h", c.leaseDuration)
	}
	return c, nil
}
