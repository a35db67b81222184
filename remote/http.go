package remote

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/internal/daemon"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/leaderelection"
	"github.com/loomrt/loom/observe"
)

// httpStopTimeout bounds the wait for scrapes in flight when the process
// stops.
const httpStopTimeout = 5 * time.Second

// readiness is what /readyz checks.
type readiness struct {
	mgr      *controller.Manager
	lease    *leaderelection.Elector // nil without leader election
	stopping atomic.Bool
}

// options are the checks and status lines of /readyz. With leader election
// on, a cold follower (-warm-standby=false) is not ready, and that is said
// before the cache check, which names the types it leaves unwatched: the
// flag is the fix.
func (r *readiness) options() []observe.Option {
	opts := []observe.Option{
		observe.WithReadiness("stopping", func(context.Context) error {
			if r.stopping.Load() {
				return errors.New("the process is stopping")
			}
			return nil
		}),
	}
	if r.lease != nil {
		opts = append(opts, observe.WithReadiness("warm standby", func(context.Context) error {
			if r.mgr.LeaderState() == controller.FollowingCold {
				return errors.New("following cold (-warm-standby=false): the singleton controllers' types are not cached here, " +
					"so a take-over by this replica would wait for them to prime; run with -warm-standby=true for a ready standby")
			}
			return nil
		}))
	}
	opts = append(opts, observe.WithReadiness("cache", func(context.Context) error {
		return r.mgr.CheckPrimed() // names the types, and why a watch fails
	}))
	if r.lease != nil {
		opts = append(opts,
			observe.WithReadiness("leader election", func(context.Context) error {
				if r.mgr.LeaderState() != controller.Leading && r.lease.Holder() == "" {
					return errors.New("no leader known yet: this replica neither holds the lease nor has seen its holder")
				}
				return nil
			}),
			observe.WithStatus("leader", func() string { return r.mgr.LeaderState().String() }))
	}
	return opts
}

// listenHTTP listens on f.httpAddr for the metrics of g, the probes of
// ready and, with -pprof, the profiler; the metrics and profiler behind the
// token of -http-token-file (read again every -reload-interval until ctx
// ends). Nil without -http-addr.
func listenHTTP(ctx context.Context, f config, g prometheus.Gatherer, ready *readiness, logger hclog.Logger) (*daemon.HTTPServer, error) {
	opts := append(ready.options(), observe.WithMetrics(g))
	if f.pprof {
		opts = append(opts, observe.WithPprof())
	}
	if f.httpTokenFile != "" {
		token, err := daemon.WatchToken(ctx, "http-token-file", f.httpTokenFile, f.reloadInterval, logger)
		if err != nil {
			return nil, err
		}
		opts = append(opts, observe.WithBearerToken(token))
	}
	return daemon.ListenHTTP(f.httpAddr, daemon.DefaultMaxHTTPConns, opts...)
}
