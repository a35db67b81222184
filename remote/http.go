package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
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

func (r *readiness) options() []observe.Option {
	opts := []observe.Option{
		observe.WithReadiness("stopping", func(context.Context) error {
			if r.stopping.Load() {
				return errors.New("the process is stopping")
			}
			return nil
		}),
		observe.WithReadiness("cache", func(context.Context) error {
			return r.mgr.CheckPrimed() // names the types, and why a watch fails
		}),
	}
	if r.lease != nil {
		opts = append(opts, observe.WithReadiness("leader election", func(context.Context) error {
			if !r.lease.Held() && r.lease.Holder() == "" {
				return errors.New("no leader known yet: this replica neither holds the lease nor has seen its holder")
			}
			return nil
		}))
	}
	return opts
}

// httpServer serves the observe endpoints on a listener.
type httpServer struct {
	srv  *http.Server
	lis  net.Listener
	done chan error
}

// listenHTTP listens on f.httpAddr and serves the metrics of g, the probes
// of ready and, with -pprof, the profiler. Nil without -http-addr.
func listenHTTP(f config, g prometheus.Gatherer, ready *readiness) (*httpServer, error) {
	if f.httpAddr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			err = fmt.Errorf("%w (choose another -http-addr, or -http-addr '' to turn the HTTP endpoints off)", err)
		}
		return nil, fmt.Errorf("-http-addr: %w", err)
	}
	opts := append(ready.options(), observe.WithMetrics(g))
	if f.pprof {
		opts = append(opts, observe.WithPprof())
	}
	return &httpServer{
		srv:  &http.Server{Handler: observe.NewHandler(opts...), ReadHeaderTimeout: 10 * time.Second},
		lis:  lis,
		done: make(chan error, 1),
	}, nil
}

func (h *httpServer) serve(logger hclog.Logger) {
	logger.Info("HTTP server listening", "addr", h.lis.Addr().String())
	go func() {
		err := h.srv.Serve(h.lis)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		h.done <- err
	}()
}

// stop shuts the server down (a scrape in flight finishes).
func (h *httpServer) stop(logger hclog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), httpStopTimeout)
	defer cancel()
	if err := h.srv.Shutdown(ctx); err != nil {
		h.srv.Close()
	}
	if err := <-h.done; err != nil {
		logger.Error("HTTP server", "error", err)
	}
}
