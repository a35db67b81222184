package host

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/loomrt/loom/internal/daemon"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/observe"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"

	"github.com/prometheus/client_golang/prometheus"
)

// readyProbeID is what the storage readiness check reads: a name no one
// writes, so the answer is a cheap "not found".
var readyProbeID = &pbresource.ID{
	Type:    resource.TypeV1Tombstone,
	Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
	Name:    "loom-readyz-probe",
}

// readiness is what /readyz checks.
type readiness struct {
	serving *atomic.Bool // the gRPC server serves (false again once shutdown begins)
	backend storage.Backend
	mgr     *controller.Manager
}

func (r readiness) options() []observe.Option {
	return []observe.Option{
		observe.WithReadiness("grpc", func(context.Context) error {
			if !r.serving.Load() {
				return errors.New("the gRPC server is not serving")
			}
			return nil
		}),
		observe.WithReadiness("storage", func(ctx context.Context) error {
			_, err := r.backend.Read(ctx, storage.StrongConsistency, readyProbeID)
			if err != nil && !errors.Is(err, storage.ErrNotFound) {
				return err
			}
			return nil
		}),
		observe.WithReadiness("cache", func(context.Context) error {
			return r.mgr.CheckPrimed() // names the types, and why a watch fails
		}),
	}
}

// listenHTTP listens on f.httpAddr, holding at most -max-http-conns
// connections, for the metrics of g, the probes of ready and, with -pprof,
// the profiler. Nil without -http-addr.
func listenHTTP(f config, g prometheus.Gatherer, ready readiness) (*daemon.HTTPServer, error) {
	opts := append(ready.options(), observe.WithMetrics(g))
	if f.pprof {
		opts = append(opts, observe.WithPprof())
	}
	return daemon.ListenHTTP(f.httpAddr, f.maxHTTPConns, opts...)
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
// the backend counts its watches, and its request metrics when it has
// them. It panics if reg has them already.
func mustRegisterStorageMetrics(reg prometheus.Registerer, backend storage.Backend) {
	if wc, ok := backend.(watchCounter); ok {
		reg.MustRegister(watchCollector{backend: wc})
	}
	if rm, ok := backend.(requestMetrics); ok {
		reg.MustRegister(rm.Metrics())
	}
}
