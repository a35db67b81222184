package host

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/internal/daemon"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/observe"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"
)

// readyProbeID is what the storage readiness check reads: a name no one
// writes, so the answer is a cheap "not found".
var readyProbeID = &pbresource.ID{
	Type:    resource.TypeV1Tombstone,
	Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
	Name:    "loom-readyz-probe",
}

const (
	// storageProbeTimeout bounds the storage readiness check: well under
	// Kubernetes' default probe timeout (1 s), so that a store that lost
	// its quorum (where a strongly consistent read stalls) fails /readyz
	// rather than timing the probe out.
	storageProbeTimeout = 500 * time.Millisecond
	// storageProbeFresh is how long a storage check's answer is reused:
	// however many probes come, the store gets at most one read per
	// storageProbeFresh, and never two at once.
	storageProbeFresh = 200 * time.Millisecond
)

// readiness is what /readyz checks.
type readiness struct {
	serving *atomic.Bool // the gRPC server serves (false again once the drain begins)
	backend storage.Backend
	mgr     *controller.Manager
}

func (r readiness) options() []observe.Option {
	probe := &storageProbe{backend: r.backend, timeout: storageProbeTimeout, fresh: storageProbeFresh}
	return []observe.Option{
		observe.WithReadiness("grpc", func(context.Context) error {
			if !r.serving.Load() {
				return errors.New("the server is shutting down")
			}
			return nil
		}),
		observe.WithReadiness("storage", probe.check),
		observe.WithReadiness("cache", func(context.Context) error {
			// A cold follower (-warm-standby=false) leaves the types of
			// the singleton controllers unwatched until it leads, and the
			// API it serves does not read the Manager's cache: it is
			// ready to serve once what it watches is primed.
			return r.mgr.CheckWatchedPrimed() // names the types, and why a watch fails
		}),
		// Whether this server runs the singleton controllers. Every
		// server serves the API whichever it is, so a follower, even a
		// cold one, is ready: /readyz routes clients.
		observe.WithStatus("leader", func() string { return r.mgr.LeaderState().String() }),
	}
}

// storageProbe is the storage readiness check: a strongly consistent read
// of a name no one writes, answered within timeout. Concurrent checks share
// one read, and its answer stands for fresh, so a flood of probes does not
// become a flood of reads on the store.
type storageProbe struct {
	backend        storage.Backend
	timeout, fresh time.Duration

	mu      sync.Mutex
	reading chan struct{} // closed when the read running ends; nil when none runs
	started time.Time     // when the read running started
	err     error         // the last read's answer
	at      time.Time     // when it came; zero before the first
}

func (p *storageProbe) check(ctx context.Context) error {
	p.mu.Lock()
	if !p.at.IsZero() && time.Since(p.at) < p.fresh {
		err := p.err
		p.mu.Unlock()
		return err
	}
	if p.reading == nil {
		p.reading, p.started = make(chan struct{}), time.Now()
		go p.read(p.reading)
	}
	reading, deadline := p.reading, p.started.Add(p.timeout)
	p.mu.Unlock()

	// A read that overruns (a backend that ignores its context) is still
	// the only one: later checks fail at once until it ends.
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-reading:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.err
	case <-timer.C:
		return p.slow()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// read reads the probe's name and records the answer.
func (p *storageProbe) read(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	_, err := p.backend.Read(ctx, storage.StrongConsistency, readyProbeID)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		err = nil
	case err != nil && ctx.Err() != nil:
		err = p.slow()
	}
	p.mu.Lock()
	p.err, p.at, p.reading = err, time.Now(), nil
	p.mu.Unlock()
	close(done)
}

func (p *storageProbe) slow() error {
	return fmt.Errorf("no answer within %s", p.timeout)
}

// listenHTTP listens on f.httpAddr, holding at most -max-http-conns
// connections, for the metrics of g, the probes of ready and, with -pprof,
// the profiler, and the web console ui under /ui/ when not nil; over TLS
// with -http-tls, the metrics and profiler behind the token of
// -http-token-file (read again every -reload-interval until ctx ends).
// Nil without -http-addr.
func listenHTTP(ctx context.Context, f config, g prometheus.Gatherer, ready readiness, ui http.Handler, logger hclog.Logger) (*daemon.HTTPServer, error) {
	opts := append(ready.options(), observe.WithMetrics(g))
	if ui != nil {
		opts = append(opts, observe.WithHandler("/ui", ui), observe.WithHandler("/ui/", ui))
	}
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
	tlsCfg, err := httpTLS(f, logger)
	if err != nil {
		return nil, err
	}
	srv, err := daemon.ListenHTTP(f.httpAddr, f.maxHTTPConns, opts...)
	if srv != nil && tlsCfg != nil {
		srv.UseTLS(tlsCfg)
	}
	return srv, err
}

// watchCounter is a backend that counts its watches (both of Loom's do).
type watchCounter interface{ WatchStats() storage.WatchStats }

var (
	watchesOpenDesc = prometheus.NewDesc("loom_storage_watches_open",
		"Watches open on the storage backend: one per WatchList stream, the in-process controllers' included.", nil, nil)
	watchEventsBufferedDesc = prometheus.NewDesc("loom_storage_watch_events_buffered",
		"Changes the storage backend's open watches have not handed to their consumers yet, summed over the watches (in-memory: entries of the shared event log not yet read; etcd: each watch's own buffer).", nil, nil)
	watchesDroppedDesc = prometheus.NewDesc("loom_storage_watches_dropped_total",
		"Watches the storage backend ended because their consumers fell behind (each re-watches and lists anew).", nil, nil)
)

// watchCollector serves a backend's watch counts, read once per scrape.
type watchCollector struct{ backend watchCounter }

func (c watchCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- watchesOpenDesc
	ch <- watchEventsBufferedDesc
	ch <- watchesDroppedDesc
}

func (c watchCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.backend.WatchStats()
	ch <- prometheus.MustNewConstMetric(watchesOpenDesc, prometheus.GaugeValue, float64(s.Open))
	ch <- prometheus.MustNewConstMetric(watchEventsBufferedDesc, prometheus.GaugeValue, float64(s.Buffered))
	ch <- prometheus.MustNewConstMetric(watchesDroppedDesc, prometheus.CounterValue, float64(s.Dropped))
}

// requestMetrics is a backend with metrics of its own requests (etcd's).
type requestMetrics interface{ Metrics() prometheus.Collector }

// mustRegisterStorageMetrics registers backend's watch gauges on reg when
// the backend counts its watches, its resource gauges when it counts its
// resources (storage.Counter), and its request metrics when it has them.
// It panics if reg has them already.
func mustRegisterStorageMetrics(reg prometheus.Registerer, backend storage.Backend, logger hclog.Logger) {
	if wc, ok := backend.(watchCounter); ok {
		reg.MustRegister(watchCollector{backend: wc})
	}
	if c, ok := backend.(storage.Counter); ok {
		reg.MustRegister(countsCollector{counter: c, logger: logger})
	}
	if rm, ok := backend.(requestMetrics); ok {
		reg.MustRegister(rm.Metrics())
	}
}

// inmemLease names the lease of a server on in-memory storage in
// loom_leader: it always leads.
const inmemLease = "inmem"

// mustRegisterLeaderMetric registers loom_leader for the lease named
// election; a nil lease is always held (in-memory storage).
func mustRegisterLeaderMetric(reg prometheus.Registerer, election string, lease leaderLease) {
	held := func() bool { return true }
	if lease != nil {
		held = lease.Held
	}
	reg.MustRegister(daemon.LeaderCollector(election, held))
}

// grpcLatencyBuckets are the bounds, in seconds, of the gRPC handling-time
// histogram: from a cached read (under a millisecond) to a write that
// waits on a slow etcd (seconds). A WatchList's handling time is how long
// the watch stayed open: leave it out of latency alerts.
var grpcLatencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// newGRPCMetrics returns the gRPC server's metrics: calls by method and
// code, and their handling time (grpc_server_handling_seconds).
func newGRPCMetrics() *grpcprom.ServerMetrics {
	return grpcprom.NewServerMetrics(grpcprom.WithServerHandlingTimeHistogram(
		grpcprom.WithHistogramBuckets(grpcLatencyBuckets)))
}
