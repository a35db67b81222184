package controller

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller/queue"
	"github.com/loomrt/loom/predicate"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
)

type workQueue = queue.Queue[reconcile.RequestKey, reconcile.Request]

// subscription is one running controller as the dispatcher sees it.
type subscription struct {
	c       *Controller
	managed resource.UnversionedType
	watches map[resource.UnversionedType]reconcile.DependencyMapper
	queue   *workQueue
	inbox   inbox
	filters map[resource.UnversionedType][]predicate.Predicate // nil without WithEventFilter
	logger  hclog.Logger
}

func (s *subscription) types() []resource.UnversionedType {
	keys := []resource.UnversionedType{s.managed}
	for k := range s.watches {
		keys = append(keys, k)
	}
	return keys
}

// deliver routes one cache change: the managed type queues the resource,
// a watched type goes to its mapper.
func (s *subscription) deliver(typ resource.UnversionedType, ev cache.Event) {
	if f := s.filters[typ]; f != nil && !passes(f, ev, s.logger) {
		return
	}
	if typ == s.managed {
		req := reconcile.Request{ID: ev.Resource.Id} // read-only, like the event
		s.queue.AddPriority(req.Key(), req, s.priorityOf(ev))
		return
	}
	if mapper, ok := s.watches[typ]; ok {
		ev.Old = nil // mappers see the new state; do not keep the old copy alive while the change waits
		s.inbox.push(mapperJob{mapper: mapper, event: ev})
	}
}

// priorityOf returns the priority of the requests a cache change queues:
// Low for a change found in a snapshot (nobody is waiting for it), Normal
// for a live one.
func (s *subscription) priorityOf(ev cache.Event) queue.Priority {
	if ev.Snapshot {
		return s.low()
	}
	return queue.Normal
}

// low is the priority of the requests nobody is waiting for: Low.
func (s *subscription) low() queue.Priority {
	if s.c.fifo {
		return queue.Normal
	}
	return queue.Low
}

// queueCached queues a request for every managed resource the cache
// holds, at Low priority, so that the live changes that come meanwhile
// go first (within the queue's aging bound). It returns how many it
// queued.
func (s *subscription) queueCached(c *cache.Cache) int {
	ids, err := c.IDs(s.c.managedType)
	if err != nil {
		s.logger.Error("listing managed resources", "error", err)
	}
	for _, id := range ids {
		req := reconcile.Request{ID: id}
		s.queue.AddPriority(req.Key(), req, s.low())
	}
	return len(ids)
}

// runController runs one start of c until ctx ends, writing through
// client (the Manager's, or a fenced one for a singleton's term).
func (m *Manager) runController(ctx context.Context, c *Controller, client pbresource.ResourceServiceClient) {
	logger := c.logger
	if logger == nil {
		logger = m.logger.Named(c.name)
	}
	logger = logger.With("controller", c.name)
	rt := reconcile.Runtime{Client: client, Logger: logger, Cache: m.cache}
	met := m.metrics.forController(c.name)
	q := queue.New[reconcile.RequestKey, reconcile.Request](queue.Options{
		BaseDelay: c.baseBackoff,
		MaxDelay:  c.maxBackoff,
		Metrics:   met.queue,
	})
	defer q.ShutDownNow()

	if c.initializer != nil && !m.initialize(ctx, c, rt, logger) {
		return
	}

	s := &subscription{
		c:       c,
		managed: resource.UnversionedTypeFrom(c.managedType),
		watches: make(map[resource.UnversionedType]reconcile.DependencyMapper),
		queue:   q,
		filters: c.eventFilters(),
		logger:  logger,
	}
	s.inbox.init()
	for _, w := range c.watches {
		s.watches[resource.UnversionedTypeFrom(w.typ)] = w.mapper
	}
	// Subscribe before listing: a change after this point is delivered, a
	// change before it is in the cache already, so nothing falls between.
	m.subscribe(s)
	defer m.unsubscribe(s)
	// The recent changes go in first, and the workers start on them while
	// the bulk of the cache is queued behind (at 100k resources that takes
	// tens of milliseconds). A recent one handed out before the bulk
	// reaches it is queued once more, at Low: at most the recent record's
	// bound of extra reconciles.
	recent := s.queueRecent(m.recent[s.managed], m.cache)

	own := &ownWrites{q: q, bound: c.readYourWritesBound(), timeouts: met.ryowTimeouts, logger: logger}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.runMappers(ctx, rt, logger, m.metrics.forMappers(c.name))
	}()
	if c.resync > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.resync(ctx, m.cache, c.resync)
		}()
	}
	m.startWorkers(ctx, &wg, c, q, rt, client, logger, met, own)
	n := s.queueCached(m.cache)
	logger.Debug("controller started", "resources", n, "recent", recent, "workers", c.concurrency)
	<-ctx.Done()
	q.ShutDownNow()
	wg.Wait()
	own.stop()
	logger.Debug("controller stopped")
}

// startWorkers starts c's workers on q, each counted in wg.
func (m *Manager) startWorkers(ctx context.Context, wg *sync.WaitGroup, c *Controller, q *workQueue, rt reconcile.Runtime,
	client pbresource.ResourceServiceClient, logger hclog.Logger, met *controllerMetrics, own *ownWrites) {
	refused := &refusals{logger: logger, count: met.authErrors}
	for i := 0; i < c.concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{c: c, q: q, rt: rt, logger: logger, met: met, refused: refused, own: own}
			w.writes.init(client, m.cache)
			w.rt.Client = &w.writes
			w.run(ctx)
		}()
	}
}

// initialize runs c's initializer until it succeeds; false if ctx ended.
func (m *Manager) initialize(ctx context.Context, c *Controller, rt reconcile.Runtime, logger hclog.Logger) bool {
	b := c.newBackOff(30 * time.Second)
	for {
		err := safeCall(func() error { return c.initializer.Initialize(ctx, rt) })
		if err == nil {
			return true
		}
		wait := b.NextBackOff()
		logger.Error("controller initializer failed; retrying", "error", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// worker reconciles requests from the queue.
type worker struct {
	c      *Controller
	q      *workQueue
	rt     reconcile.Runtime
	logger hclog.Logger
	met    *controllerMetrics
	// refused logs refusals for want of a token or a right once per
	// change, not once per retry.
	refused *refusals
	own     *ownWrites
	writes  writeRecorder // rt.Client
	gates   gates
	loggers requestLoggers
}

// run reconciles keys until the queue shuts down. A key goes back to the
// queue once the cache holds what its reconcile wrote (see ownWrites);
// meanwhile the worker goes on with other keys.
func (w *worker) run(ctx context.Context) {
	for {
		item, ok := w.q.Get()
		if !ok {
			return
		}
		end := w.reconcile(ctx, item)
		written := w.writes.take()
		if ctx.Err() != nil {
			w.q.DoneAt(item, end) // stopping: nothing will be reconciled again
			continue
		}
		w.own.handBack(item, end, written, &w.gates)
	}
}

// reconcile runs one reconcile of the request of item, taken from the
// queue at item.Started (zero if the queue did not read the clock), and
// returns when it ended. The reconcile-time metric and the queue's work
// duration share that one reading of the clock. A requeue keeps the
// priority the request had; a retry after a backoff goes in at Low.
func (w *worker) reconcile(ctx context.Context, item queue.Item[reconcile.RequestKey, reconcile.Request]) time.Time {
	key, req, start := item.Key, item.Value, item.Started
	if start.IsZero() {
		start = time.Now()
	}
	rt := w.runtimeFor(req)
	err := safeCall(func() error { return w.c.reconciler.Reconcile(ctx, rt, req) })
	end := time.Now()
	w.met.time.Observe(end.Sub(start).Seconds())
	if reconcile.IsTerminalError(err) {
		w.met.terminal.Inc()
		w.met.errors.Inc()
		w.q.Forget(key)
		if ctx.Err() == nil {
			w.logger.Error("reconcile failed with a terminal error; not retrying", "request", key.String(), "error", err)
		}
		return end
	}
	if d, ok := requeueAfter(err); ok {
		w.q.Forget(key)
		if d <= 0 {
			w.met.requeue.Inc()
			w.q.AddPriority(key, req, item.Priority)
		} else {
			w.met.requeueAfter.Inc()
			w.q.AddAfterPriority(key, req, d, item.Priority)
		}
		return end
	}
	if err != nil {
		w.met.failure.Inc()
		w.met.errors.Inc()
		if _, isPanic := err.(panicError); isPanic {
			w.met.panics.Inc()
		}
		if w.writes.conflicted(err) {
			w.retryConflict(ctx, item, err)
			return end
		}
		if ctx.Err() == nil && !w.refused.failed(key, err) {
			w.logger.Error("reconcile failed; retrying with backoff", "request", key.String(), "error", err, "retries", w.q.NumRequeues(key))
		}
		w.q.AddRateLimited(key, req)
		return end
	}
	w.met.success.Inc()
	w.refused.succeeded(key)
	w.q.Forget(key)
	return end
}

// retryConflict requeues a reconcile that failed on a write conflict: its
// cache was behind the store (a write by someone else, most likely, since
// its own are waited for). It is retried at once the first time since the
// key's last success, and with the usual backoff after that, so that a
// cache that does not catch up does not spin the key. A conflict is
// expected, so it is logged at debug, and counted.
func (w *worker) retryConflict(ctx context.Context, item queue.Item[reconcile.RequestKey, reconcile.Request], err error) {
	w.met.conflicts.Inc()
	now := w.q.AddRetry(item.Key, item.Value, item.Priority)
	if ctx.Err() == nil {
		w.logger.Debug("reconcile hit a write conflict; retrying", "request", item.Key.String(), "error", err, "at_once", now)
	}
}

// panicError is a recovered panic, reported as an error.
type panicError struct {
	value any
	stack []byte
}

func (p panicError) Error() string {
	return fmt.Sprintf("panic: %v\n%s", p.value, p.stack)
}

// safeCall runs f, turning a panic into an error.
func safeCall(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = panicError{value: r, stack: debug.Stack()}
		}
	}()
	return f()
}
