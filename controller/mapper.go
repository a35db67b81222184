package controller

import (
	"context"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller/queue"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
)

// mapperJob is one watched change waiting for its dependency mapper, or,
// when retry is set, a failed change whose backoff has passed.
type mapperJob struct {
	mapper reconcile.DependencyMapper
	event  cache.Event
	retry  *mapperRetry
}

// inbox hands changes from the watch goroutines (which must never wait on a
// controller) to the controller's mapper goroutine. It grows as needed; it
// holds pointers to cached resources, not copies.
type inbox struct {
	mu     sync.Mutex
	jobs   []mapperJob
	signal chan struct{}
}

func (in *inbox) init() { in.signal = make(chan struct{}, 1) }

func (in *inbox) push(j mapperJob) {
	in.mu.Lock()
	in.jobs = append(in.jobs, j)
	in.mu.Unlock()
	select {
	case in.signal <- struct{}{}:
	default:
	}
}

func (in *inbox) take() []mapperJob {
	in.mu.Lock()
	defer in.mu.Unlock()
	jobs := in.jobs
	in.jobs = nil
	return jobs
}

// retryKey names a watched resource: its type (one mapper per watched type)
// and its tenancy and name.
type retryKey struct {
	typ resource.UnversionedType
	key reconcile.RequestKey
}

func retryKeyOf(j mapperJob) retryKey {
	id := j.event.Resource.GetId()
	return retryKey{
		typ: resource.UnversionedTypeFrom(id.GetType()),
		key: reconcile.Request{ID: id}.Key(),
	}
}

// mapperRetry is the pending retry of one watched resource whose mapper
// failed: the latest failed change and its backoff. A resource has at most
// one, so the retries a failing mapper holds are bounded by the resources it
// failed on, however often they change.
type mapperRetry struct {
	key      retryKey
	job      mapperJob
	backoff  *backoff.ExponentialBackOff
	failures int
	timer    *time.Timer
}

// mappers runs a subscription's dependency mappers: fresh changes in the
// order they arrived, and failed changes again after their backoff, until
// they succeed or the controller stops. A failing change never holds up
// the others: it waits on a timer, not in line. It is owned by the one
// goroutine that runs runMappers.
type mappers struct {
	s       *subscription
	rt      reconcile.Runtime
	logger  hclog.Logger
	met     mapperMetrics
	retries map[retryKey]*mapperRetry
}

// runMappers runs the dependency mappers of queued changes in order and
// queues the requests they return.
//
// A mapper that fails (error or panic) is retried with the controller's
// backoff (WithBackoff) until it succeeds or the controller stops (a
// controller that starts again queues every managed resource, so nothing
// is lost with the pending retries); each failure is counted in
// loom_controller_mapper_errors_total. A newer change
// of the same watched resource supersedes a failed one: mappers map the
// resource's latest state, as reconcilers do, so only the latest change is
// retried, and a newer change that maps successfully cancels the retry.
//
// A request that does not name the controller's managed type is a mapper
// bug that no retry would fix: it is logged, counted in
// loom_controller_mapper_invalid_requests_total and not queued; the
// mapper's other requests are.
func (s *subscription) runMappers(ctx context.Context, rt reconcile.Runtime, logger hclog.Logger, met mapperMetrics) {
	m := &mappers{s: s, rt: rt, logger: logger, met: met, retries: make(map[retryKey]*mapperRetry)}
	defer m.stopRetries()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.inbox.signal:
		}
		for _, j := range s.inbox.take() {
			if ctx.Err() != nil {
				return
			}
			m.run(ctx, j)
		}
	}
}

// run maps one job and queues its requests, or schedules its retry.
func (m *mappers) run(ctx context.Context, j mapperJob) {
	r := j.retry
	if r != nil {
		if m.retries[r.key] != r {
			return // superseded by a newer change that mapped successfully
		}
		j = r.job
	}
	reqs, err := callMapper(ctx, m.rt, j)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		m.met.errors.Inc()
		m.retry(ctx, j, r, err)
		return
	}
	if r != nil {
		delete(m.retries, r.key)
	} else if len(m.retries) > 0 {
		k := retryKeyOf(j)
		if old, ok := m.retries[k]; ok {
			old.timer.Stop()
			delete(m.retries, k)
		}
	}
	managed := m.s.c.managedType
	for _, req := range reqs {
		if req.ID == nil {
			continue
		}
		if !resource.EqualUnversionedType(req.ID.Type, managed) {
			m.met.invalid.Inc()
			m.logger.Error("dependency mapper returned a request for another type than the controller manages; not queued",
				"resource", resource.IDString(j.event.Resource.GetId()), "request", resource.IDString(req.ID),
				"managed_type", resource.TypeString(managed))
			continue
		}
		m.s.queue.AddPriority(req.Key(), req, m.s.priorityOf(j.event))
	}
}

// retry schedules another try of failed job j; r is its pending retry if
// j came from one.
func (m *mappers) retry(ctx context.Context, j mapperJob, r *mapperRetry, err error) {
	if r == nil {
		k := retryKeyOf(j)
		if old, ok := m.retries[k]; ok {
			// A retry is pending already: it takes over this newer change
			// and keeps its backoff and timer.
			old.job = j
			old.failures++
			m.logger.Warn("dependency mapper failed; retrying", "resource", resource.IDString(j.event.Resource.GetId()),
				"error", err, "failures", old.failures)
			return
		}
		r = &mapperRetry{
			key:     k,
			job:     j,
			backoff: m.s.c.newBackOff(queue.DefaultMaxDelay),
		}
		m.retries[k] = r
	}
	r.failures++
	wait := r.backoff.NextBackOff()
	m.logger.Warn("dependency mapper failed; retrying", "resource", resource.IDString(j.event.Resource.GetId()),
		"error", err, "failures", r.failures, "retry_in", wait)
	inbox := &m.s.inbox
	r.timer = time.AfterFunc(wait, func() {
		if ctx.Err() == nil {
			inbox.push(mapperJob{retry: r})
		}
	})
}

// stopRetries drops the pending retries when the controller stops.
func (m *mappers) stopRetries() {
	for k, r := range m.retries {
		r.timer.Stop()
		delete(m.retries, k)
	}
}

func callMapper(ctx context.Context, rt reconcile.Runtime, j mapperJob) (reqs []reconcile.Request, err error) {
	err = safeCall(func() error {
		var e error
		reqs, e = j.mapper(ctx, rt, j.event.Resource)
		return e
	})
	return reqs, err
}
