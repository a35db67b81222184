package controller

import (
	"github.com/loomrt/loom/controller/queue"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Manager's metric families. Names follow controller-runtime
// (with a loom_ prefix for the reconcile families; the work-queue families
// keep client-go's workqueue_ names) so existing dashboards translate.
type metrics struct {
	reconcileTotal  *prometheus.CounterVec
	reconcileErrors *prometheus.CounterVec
	reconcileTime   *prometheus.HistogramVec
	reconcilePanics *prometheus.CounterVec
	mapperErrors    *prometheus.CounterVec
	mapperInvalid   *prometheus.CounterVec
	watchErrors     *prometheus.CounterVec
	authErrors      *prometheus.CounterVec
	conflicts       *prometheus.CounterVec
	ryowTimeouts    *prometheus.CounterVec
	queue           *queue.MetricsVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		reconcileTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_controller_reconcile_total",
			Help: "Total number of reconciliations per controller, by result (success, error, terminal_error, requeue, requeue_after).",
		}, []string{"controller", "result"}),
		reconcileErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_controller_reconcile_errors_total",
			Help: "Total number of reconciliations per controller that returned an error (terminal or not) or panicked.",
		}, []string{"controller"}),
		reconcileTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loom_controller_reconcile_time_seconds",
			Help:    "Time per reconciliation per controller.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 20),
		}, []string{"controller"}),
		reconcilePanics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_controller_reconcile_panics_total",
			Help: "Total number of reconciliations per controller that panicked.",
		}, []string{"controller"}),
		mapperErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_controller_mapper_errors_total",
			Help: "Total number of dependency mapper calls per controller that returned an error or panicked (each is retried).",
		}, []string{"controller"}),
		mapperInvalid: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_controller_mapper_invalid_requests_total",
			Help: "Total number of requests per controller that a dependency mapper returned for another type than the controller manages (not queued).",
		}, []string{"controller"}),
		watchErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_controller_watch_errors_total",
			Help: "Total number of the Manager's watch streams that ended with an error or were refused, per watched type (group.version.kind) and gRPC code (each is retried).",
		}, []string{"type", "code"}),
		authErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_controller_reconcile_auth_errors_total",
			Help: "Total number of reconciliations per controller that failed because the server refused a call for want of a token or a right, by gRPC code (Unauthenticated, PermissionDenied; Internal for Consul's \"ACL not found\").",
		}, []string{"controller", "code"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_controller_conflicts_total",
			Help: "Total number of reconciliations per controller that failed on a write conflict (Aborted: the resource changed since it was read); each is also counted as an error, and retried.",
		}, []string{"controller"}),
		ryowTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_controller_read_your_writes_timeouts_total",
			Help: "Total number of times per controller a resource was reconciled again before the cache held what its last reconcile wrote, because the wait reached its bound.",
		}, []string{"controller"}),
	}
	qm, err := queue.NewMetricsVec(reg)
	if err != nil {
		return nil, err
	}
	m.queue = qm
	if reg != nil {
		for _, c := range []prometheus.Collector{m.reconcileTotal, m.reconcileErrors, m.reconcileTime, m.reconcilePanics, m.mapperErrors, m.mapperInvalid, m.watchErrors, m.authErrors, m.conflicts, m.ryowTimeouts} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// controllerMetrics are one controller's metrics, bound to its labels.
type controllerMetrics struct {
	success, failure, terminal prometheus.Counter
	requeue, requeueAfter      prometheus.Counter
	errors, panics             prometheus.Counter
	conflicts, ryowTimeouts    prometheus.Counter
	time                       prometheus.Observer
	queue                      *queue.Metrics
	authErrors                 *prometheus.CounterVec // by code
}

func (m *metrics) forController(name string) *controllerMetrics {
	return &controllerMetrics{
		success:      m.reconcileTotal.WithLabelValues(name, "success"),
		failure:      m.reconcileTotal.WithLabelValues(name, "error"),
		terminal:     m.reconcileTotal.WithLabelValues(name, "terminal_error"),
		requeue:      m.reconcileTotal.WithLabelValues(name, "requeue"),
		requeueAfter: m.reconcileTotal.WithLabelValues(name, "requeue_after"),
		errors:       m.reconcileErrors.WithLabelValues(name),
		panics:       m.reconcilePanics.WithLabelValues(name),
		conflicts:    m.conflicts.WithLabelValues(name),
		ryowTimeouts: m.ryowTimeouts.WithLabelValues(name),
		time:         m.reconcileTime.WithLabelValues(name),
		queue:        m.queue.For(name),
		authErrors:   m.authErrors.MustCurryWith(prometheus.Labels{"controller": name}),
	}
}

// mapperMetrics are one controller's dependency-mapper metrics.
type mapperMetrics struct {
	errors, invalid prometheus.Counter
}

func (m *metrics) forMappers(name string) mapperMetrics {
	return mapperMetrics{
		errors:  m.mapperErrors.WithLabelValues(name),
		invalid: m.mapperInvalid.WithLabelValues(name),
	}
}
