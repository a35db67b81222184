package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// DefaultCallTimeout is how long the backend waits for etcd to answer one
// request of a read, a list or a write, unless New is given
// WithCallTimeout. etcd gives up on a proposal it cannot commit after 5 s
// plus two election timeouts (7 s with its defaults); the backend answers
// its caller before that.
const DefaultCallTimeout = 5 * time.Second

// maxDeadlineReserve caps the time a call leaves before its caller's
// deadline (see callContext).
const maxDeadlineReserve = time.Second

// WithCallTimeout sets how long the backend waits for etcd to answer one
// request (DefaultCallTimeout if not given). A read etcd does not answer in
// time fails with storage.ErrInconsistent, a write with
// storage.ErrOutcomeUnknown. A call also ends ahead of its caller's
// deadline, by a tenth of the time left (at most a second), so that a
// caller with a deadline learns the outcome before it. Values below a
// millisecond are treated as a millisecond.
func WithCallTimeout(d time.Duration) Option {
	return func(b *Backend) { b.callTimeout = max(d, time.Millisecond) }
}

// errCallTimeout is a call ended by the backend's call timeout while its
// caller still waited. It does not wrap context.DeadlineExceeded: the
// caller's deadline has not passed.
var errCallTimeout = errors.New("etcd did not answer in time")

// callContext returns the context of one etcd call made for ctx: it ends
// after the call timeout, or a tenth of the time left (at most
// maxDeadlineReserve) before ctx's deadline, whichever comes first.
func (b *Backend) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	d := b.callTimeout
	if deadline, ok := ctx.Deadline(); ok {
		left := time.Until(deadline)
		d = min(d, left-min(left/10, maxDeadlineReserve))
	}
	return context.WithTimeout(ctx, d)
}

// callError returns err of a call made with callCtx for ctx, with a call
// that only its own timeout ended told apart as errCallTimeout.
func (b *Backend) callError(ctx, callCtx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && callCtx.Err() != nil {
		return fmt.Errorf("%w within %s (etcd.WithCallTimeout, loom server -etcd-call-timeout), or before the request's deadline: %v",
			errCallTimeout, b.callTimeout, err)
	}
	return err
}

// callGet is one Get sent to etcd for ctx, bounded and counted.
func (b *Backend) callGet(ctx context.Context, o op, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	callCtx, cancel := b.callContext(ctx)
	defer cancel()
	start := time.Now()
	resp, err := b.client.Get(callCtx, key, opts...)
	err = b.callError(ctx, callCtx, err)
	b.metrics.done(o, start, ctx, err)
	return resp, err
}

// callTxn is one transaction sent to etcd for ctx, bounded and counted.
func (b *Backend) callTxn(ctx context.Context, o op, cmps []clientv3.Cmp, then, els []clientv3.Op) (*clientv3.TxnResponse, error) {
	callCtx, cancel := b.callContext(ctx)
	defer cancel()
	start := time.Now()
	resp, err := b.client.Txn(callCtx).If(cmps...).Then(then...).Else(els...).Commit()
	err = b.callError(ctx, callCtx, err)
	b.metrics.done(o, start, ctx, err)
	return resp, err
}

// op is a kind of etcd request, a label of the call metrics.
type op int

const (
	opGet             op = iota // linearizable range read
	opGetSerializable           // serializable range read of one member
	opTxn                       // write transaction
	opReadTxn                   // read-only transaction (owner pages)
	numOps
)

var opNames = [numOps]string{"get", "get_serializable", "txn", "read_txn"}

// retryReason is why the backend sent a request again, a label of the retry
// metric.
type retryReason int

const (
	retryStaleMember   retryReason = iota // a serializable read repeated linearizably
	retryCompareFailed                    // a transaction sent again after its compare failed
	numRetries
)

var retryNames = [numRetries]string{"stale_member", "compare_failed"}

// callMetrics are the backend's metrics of its etcd requests. The labels
// take a fixed set of values each (opNames, retryNames, errorCode).
type callMetrics struct {
	latency     *prometheus.HistogramVec
	errors      *prometheus.CounterVec
	retries     *prometheus.CounterVec
	unavailable prometheus.Counter

	byOp    [numOps]prometheus.Observer
	byRetry [numRetries]prometheus.Counter
}

func newCallMetrics() *callMetrics {
	m := &callMetrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "loom_storage_etcd_request_duration_seconds",
			Help:    "Time etcd took to answer a request of the storage backend, failed ones included, by kind of request.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 15), // 0.5 ms to 8 s
		}, []string{"op"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_storage_etcd_request_errors_total",
			Help: "Requests of the storage backend to etcd that failed, by kind of request and cause (no_leader, timeout, unavailable, canceled, too_large, compacted, other).",
		}, []string{"op", "code"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_storage_etcd_retries_total",
			Help: "Requests the storage backend sent etcd again: a read repeated on the leader because the member was behind (stale_member), a transaction sent again after its compare failed (compare_failed).",
		}, []string{"reason"}),
		unavailable: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "loom_storage_etcd_unavailable_total",
			Help: "Requests of the storage backend that etcd could not serve: no leader, no quorum, a timeout or a lost connection.",
		}),
	}
	for o := range numOps {
		m.byOp[o] = m.latency.WithLabelValues(opNames[o])
	}
	for r := range numRetries {
		m.byRetry[r] = m.retries.WithLabelValues(retryNames[r])
	}
	return m
}

// done records a call of kind o for ctx that started at start and ended
// with err.
func (m *callMetrics) done(o op, start time.Time, ctx context.Context, err error) {
	m.byOp[o].Observe(time.Since(start).Seconds())
	if err == nil {
		return
	}
	code := errorCode(ctx, err)
	m.errors.WithLabelValues(opNames[o], code).Inc()
	switch code {
	case "no_leader", "timeout", "unavailable":
		m.unavailable.Inc()
	}
}

// retried records a request sent again for reason r.
func (m *callMetrics) retried(r retryReason) { m.byRetry[r].Inc() }

// errorCode is the cause of a failed call, one of a fixed set.
func errorCode(ctx context.Context, err error) string {
	switch {
	case ctx.Err() != nil:
		return "canceled" // the caller gave up or ended
	case errors.Is(err, rpctypes.ErrNoLeader):
		return "no_leader"
	case errorsIs(err, errCallTimeout, rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail,
		rpctypes.ErrTimeoutDueToConnectionLost, rpctypes.ErrTimeoutWaitAppliedIndex):
		return "timeout"
	case tooLarge(err):
		return "too_large"
	case errors.Is(err, rpctypes.ErrCompacted):
		return "compacted"
	case unavailable(err):
		return "unavailable"
	}
	return "other"
}

// Describe sends the descriptions of the call metrics (see Metrics).
func (m *callMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.latency.Describe(ch)
	m.errors.Describe(ch)
	m.retries.Describe(ch)
	m.unavailable.Describe(ch)
}

// Collect sends the call metrics' current values.
func (m *callMetrics) Collect(ch chan<- prometheus.Metric) {
	m.latency.Collect(ch)
	m.errors.Collect(ch)
	m.retries.Collect(ch)
	m.unavailable.Collect(ch)
}

// Metrics returns the metrics of the backend's requests to etcd, for a
// Prometheus registry: loom_storage_etcd_request_duration_seconds{op},
// loom_storage_etcd_request_errors_total{op,code},
// loom_storage_etcd_retries_total{reason} and
// loom_storage_etcd_unavailable_total. Register it once per Backend.
func (b *Backend) Metrics() prometheus.Collector { return b.metrics }
