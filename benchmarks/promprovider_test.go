package benchmarks

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// prometheusProvider is client-go's workqueue.MetricsProvider over
// Prometheus, as controller-runtime installs it
// (sigs.k8s.io/controller-runtime/pkg/metrics/workqueue.go): the same
// families, labels and buckets, without pulling controller-runtime in.
type prometheusProvider struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

func newPrometheusProvider(b *testing.B, reg prometheus.Registerer) workqueue.MetricsProvider {
	labels := []string{"name", "controller"}
	p := &prometheusProvider{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "depth", Help: "Current depth of workqueue",
		}, labels),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "adds_total", Help: "Total number of adds handled by workqueue",
		}, labels),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "queue_duration_seconds", Help: "How long in seconds an item stays in workqueue before being requested",
			Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
		}, labels),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "work_duration_seconds", Help: "How long in seconds processing an item from workqueue takes.",
			Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
		}, labels),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "unfinished_work_seconds", Help: "How many seconds of work has been done that is in progress.",
		}, labels),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "longest_running_processor_seconds", Help: "How many seconds has the longest running processor for workqueue been running.",
		}, labels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "retries_total", Help: "Total number of retries handled by workqueue",
		}, labels),
	}
	for _, c := range []prometheus.Collector{p.depth, p.adds, p.latency, p.workDuration, p.unfinished, p.longest, p.retries} {
		if err := reg.Register(c); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

func (p *prometheusProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return p.depth.WithLabelValues(name, name)
}

func (p *prometheusProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return p.adds.WithLabelValues(name, name)
}

func (p *prometheusProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return p.latency.WithLabelValues(name, name)
}

func (p *prometheusProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return p.workDuration.WithLabelValues(name, name)
}

func (p *prometheusProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.unfinished.WithLabelValues(name, name)
}

func (p *prometheusProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return p.longest.WithLabelValues(name, name)
}

func (p *prometheusProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return p.retries.WithLabelValues(name, name)
}
