package queue

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the measurements a Queue reports, already bound to their
// labels so the hot path does no label look-ups.
type Metrics struct {
	// Depth is the number of Normal keys ready for a worker.
	Depth prometheus.Gauge
	// LowDepth, when non-nil, is the number of Low keys ready for a
	// worker.
	LowDepth prometheus.Gauge
	// Adds counts keys queued (de-duplicated adds are not counted).
	Adds prometheus.Counter
	// QueueLatency observes seconds from a key being queued to a worker
	// taking it.
	QueueLatency prometheus.Observer
	// WorkDuration observes seconds from Get to Done.
	WorkDuration prometheus.Observer
	// Retries counts rate-limited re-adds.
	Retries prometheus.Counter
}

// MetricsVec holds the work-queue metric families, named as client-go and
// controller-runtime name them (workqueue_depth, workqueue_adds_total, ...)
// and labelled by controller name ("name" and "controller" labels); the
// depth is labelled by priority too ("priority": "normal" or "low").
type MetricsVec struct {
	depth        *prometheus.GaugeVec
	adds         *prometheus.CounterVec
	queueLatency *prometheus.HistogramVec
	workDuration *prometheus.HistogramVec
	retries      *prometheus.CounterVec
}

// NewMetricsVec creates the work-queue metric families and registers them
// on reg (which may be nil to keep them unregistered).
func NewMetricsVec(reg prometheus.Registerer) (*MetricsVec, error) {
	labels := []string{"name", "controller"}
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	v := &MetricsVec{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "workqueue_depth", Help: "Current number of keys waiting in the work queue, by priority.",
		}, append(labels, "priority")),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_adds_total", Help: "Total number of keys added to the work queue.",
		}, labels),
		queueLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_queue_duration_seconds", Help: "Seconds a key waits in the work queue before a worker takes it.",
			Buckets: buckets,
		}, labels),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "workqueue_work_duration_seconds", Help: "Seconds a worker spends on one key.",
			Buckets: buckets,
		}, labels),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "workqueue_retries_total", Help: "Total number of keys re-queued with backoff.",
		}, labels),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{v.depth, v.adds, v.queueLatency, v.workDuration, v.retries} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// For returns the metrics of the queue of one controller.
func (v *MetricsVec) For(controller string) *Metrics {
	return &Metrics{
		Depth:        v.depth.WithLabelValues(controller, controller, Normal.String()),
		LowDepth:     v.depth.WithLabelValues(controller, controller, Low.String()),
		Adds:         v.adds.WithLabelValues(controller, controller),
		QueueLatency: v.queueLatency.WithLabelValues(controller, controller),
		WorkDuration: v.workDuration.WithLabelValues(controller, controller),
		Retries:      v.retries.WithLabelValues(controller, controller),
	}
}
