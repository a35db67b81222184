package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
	"github.com/prometheus/client_golang/prometheus"
)

// Manager runs controllers against a ResourceService: it owns the shared
// cache and its watch streams, starts each controller once its types are
// primed (and, for singletons, while the lease is held), and stops it when
// the lease is lost or Run's context ends.
type Manager struct {
	client  pbresource.ResourceServiceClient
	logger  hclog.Logger
	cache   *cache.Cache
	flag    *flagLease
	lease   Lease
	metrics *metrics
	health  *watchHealth

	watchRetryMin, watchRetryMax time.Duration

	// cold turns warm standby off (WithWarmStandby(false)); warmed is
	// closed once every type is watched (at once when warm).
	cold   bool
	warmed chan struct{}

	// recent holds, per managed type, the resources changed most recently
	// (live events only), queued first when a controller starts.
	recent map[resource.UnversionedType]*recentChanges

	mu          sync.Mutex
	controllers []*Controller
	running     bool

	// subs lists, per unversioned type, the running controllers that want
	// its events. Dispatch reads it on every event; it is replaced, never
	// changed in place.
	subsMu sync.RWMutex
	subs   map[resource.UnversionedType][]*subscription

	primed map[resource.UnversionedType]chan struct{}

	// selections holds, per unversioned type, the selector of the
	// controllers that manage or watch it (they all agree) and the name of
	// the first of them, for messages.
	selections map[resource.UnversionedType]typeSelection

	// singletons counts singleton controllers running now; SetLeader(false)
	// waits for it to reach zero.
	singletonsMu sync.Mutex
	singletons   int
	stopped      *sync.Cond
}

// ManagerOption configures a Manager.
type ManagerOption func(*Manager) error

// WithMetrics registers the Manager's metrics on reg. Without it the
// metrics are kept but not exposed.
func WithMetrics(reg prometheus.Registerer) ManagerOption {
	return func(m *Manager) error {
		met, err := newMetrics(reg)
		if err != nil {
			return fmt.Errorf("registering controller metrics: %w", err)
		}
		m.metrics = met
		return nil
	}
}

// WithLease makes the Manager follow l for leadership instead of SetLeader.
func WithLease(l Lease) ManagerOption {
	return func(m *Manager) error {
		m.lease = l
		return nil
	}
}

// WithWatchRetry bounds the backoff between attempts to re-open a broken
// watch stream (default 10 ms to 5 s). A stream that was healthy is
// re-opened after a random pause below min, which spreads the clients of
// a restarted server.
func WithWatchRetry(min, max time.Duration) ManagerOption {
	return func(m *Manager) error {
		m.watchRetryMin, m.watchRetryMax = min, max
		return nil
	}
}

// NewManager returns a Manager that talks to client. logger may be nil.
func NewManager(client pbresource.ResourceServiceClient, logger hclog.Logger, opts ...ManagerOption) (*Manager, error) {
	if client == nil {
		return nil, fmt.Errorf("controller manager: a ResourceService client is required")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	m := &Manager{
		client: client,
		logger: logger,
		cache:  cache.New(),
		flag:   newFlagLease(),
		subs:   make(map[resource.UnversionedType][]*subscription),
		primed: make(map[resource.UnversionedType]chan struct{}),
		warmed: make(chan struct{}),
		recent: make(map[resource.UnversionedType]*recentChanges),

		selections: make(map[resource.UnversionedType]typeSelection),
	}
	m.lease = m.flag
	m.stopped = sync.NewCond(&m.singletonsMu)
	m.cache.OnIndexError(func(index string, res *pbresource.Resource, err error) {
		m.logger.Warn("cache index function failed; the resource is left out of that index",
			"index", index, "resource", resource.IDString(res.Id), "error", err)
	})
	for _, opt := range opts {
		if err := opt(m); err != nil {
			return nil, err
		}
	}
	if m.metrics == nil {
		met, err := newMetrics(nil)
		if err != nil {
			return nil, err
		}
		m.metrics = met
	}
	m.health = newWatchHealth(m.metrics.watchErrors)
	return m, nil
}

// Cache returns the Manager's shared cache (read-only).
func (m *Manager) Cache() cache.ReadOnlyCache { return m.cache }

// SetLeader tells a Manager built without WithLease whether it is the
// leader. Singleton controllers start when it becomes true. SetLeader(false)
// returns once every singleton controller has stopped (its context
// cancelled and its reconciles returned), so a host can hand leadership to
// another server without overlap. Do not call it from a reconciler.
func (m *Manager) SetLeader(leader bool) {
	m.flag.set(leader)
	if leader {
		return
	}
	m.singletonsMu.Lock()
	for m.singletons > 0 {
		m.stopped.Wait()
	}
	m.singletonsMu.Unlock()
}

// Register adds a controller. It returns an error, naming the controller,
// when the controller is misconfigured, conflicts with one registered
// before (same name, or an index of the same name on the same type), or the
// Manager is already running. MustRegister panics instead.
func (m *Manager) Register(c *Controller) error {
	if err := c.validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running {
		return fmt.Errorf("controller %q: register controllers before the manager runs", c.name)
	}
	for _, other := range m.controllers {
		if other.name == c.name {
			return fmt.Errorf("controller %q is registered twice", c.name)
		}
	}
	if err := m.checkSelections(c); err != nil {
		return err
	}
	if err := m.cache.AddType(c.managedType, c.indexes...); err != nil {
		return fmt.Errorf("controller %q: %w", c.name, err)
	}
	for _, w := range c.watches {
		if err := m.cache.AddType(w.typ, w.indexes...); err != nil {
			return fmt.Errorf("controller %q: %w", c.name, err)
		}
	}
	for _, q := range c.queries {
		if err := m.cache.AddQuery(q.name, q.query); err != nil {
			return fmt.Errorf("controller %q: %w", c.name, err)
		}
	}
	for _, t := range c.types() {
		key := resource.UnversionedTypeFrom(t)
		if _, ok := m.primed[key]; !ok {
			m.primed[key] = make(chan struct{})
		}
		if _, ok := m.selections[key]; !ok {
			m.selections[key] = typeSelection{sel: c.selectorOf(t), by: c.name}
		}
	}
	if key := resource.UnversionedTypeFrom(c.managedType); m.recent[key] == nil {
		m.recent[key] = newRecentChanges(recentChangesPerType)
	}
	m.controllers = append(m.controllers, c)
	return nil
}

// typeSelection is the selector of a type in a Manager's cache, and the
// first controller that declared it.
type typeSelection struct {
	sel selector.Selector
	by  string
}

// checkSelections reports a type c manages or watches with another
// selector than the controllers registered before: they share the cache,
// which holds one selection per type.
func (m *Manager) checkSelections(c *Controller) error {
	for _, t := range c.types() {
		prev, ok := m.selections[resource.UnversionedTypeFrom(t)]
		if !ok {
			continue
		}
		if sel := c.selectorOf(t); sel.String() != prev.sel.String() {
			return fmt.Errorf("controller %q selects %s of type %s, but controller %q selects %s; "+
				"the controllers of a Manager share its cache, so they must select the same resources of a type (WithSelector)",
				c.name, describeSelector(sel), resource.UnversionedTypeFrom(t), prev.by, describeSelector(prev.sel))
		}
	}
	return nil
}

// describeSelector renders sel for a message.
func describeSelector(sel selector.Selector) string {
	if sel.Empty() {
		return "every resource (no selector)"
	}
	return "the resources matching " + resource.Quote(sel.String())
}

// MustRegister is Register that panics on error: a misconfigured controller
// is a programming error best caught at start-up.
func (m *Manager) MustRegister(c *Controller) {
	if err := m.Register(c); err != nil {
		panic(err)
	}
}

// Run starts the watches and the controllers and blocks until ctx ends and
// everything has stopped. A Manager runs once. With warm standby off, the
// watches of the types only singleton controllers need start when the
// lease is first held (see WithWarmStandby).
func (m *Manager) Run(ctx context.Context) error {
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return fmt.Errorf("controller manager is already running")
	}
	m.running = true
	controllers := append([]*Controller(nil), m.controllers...)
	m.mu.Unlock()

	var wg sync.WaitGroup
	probe := newServerProbe()
	m.startWatches(ctx, &wg, watchedGroupVersions(controllers), func(gvs []*pbresource.Type) {
		m.watchType(ctx, &wg, probe, gvs)
	})
	for _, c := range controllers {
		wg.Add(1)
		go func(c *Controller) {
			defer wg.Done()
			m.supervise(ctx, c)
		}(c)
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}

// watchType starts the watches of one type, one per GroupVersion in gvs
// (a further one only where the server needs it), each counted in wg.
func (m *Manager) watchType(ctx context.Context, wg *sync.WaitGroup, probe *serverProbe, gvs []*pbresource.Type) {
	key := resource.UnversionedTypeFrom(gvs[0])
	first := gvs[0]
	primed := countdown(len(gvs), m.primed[key], func() {
		// Once per type and process: a re-prime after a broken
		// watch is not logged here, so a take-over from a warm
		// cache shows none.
		m.logger.Named("cache").Info("cache primed", "type", key.String(), "resources", m.cache.Len(first))
	})
	sink := m.dispatcher(key)
	for i, t := range gvs {
		w := &cacheWatcher{
			Selector: m.selections[key].sel,
			Client:   m.client,
			Cache:    m.cache,
			Logger:   m.logger.Named("cache"),
			Probe:    probe,
			Health:   m.health,
			RetryMin: m.watchRetryMin,
			RetryMax: m.watchRetryMax,
		}
		wg.Add(1)
		go func(t *pbresource.Type, extra bool) {
			defer wg.Done()
			if extra {
				// A stream for a further GroupVersion is needed only
				// where the server keeps one GroupVersion per watch;
				// Loom's first stream has them all.
				versioned, ok := probe.wait(ctx)
				if !ok {
					return
				}
				if versioned {
					primed()
					return
				}
			}
			if err := w.Run(ctx, t, sink, primed); err != nil {
				m.logger.Error("cache watch failed", "type", resource.TypeString(t), "error", err)
			}
		}(t, i > 0)
	}
}

// supervise starts c whenever it may run and stops it when it may not.
func (m *Manager) supervise(ctx context.Context, c *Controller) {
	for {
		if !m.waitAllowed(ctx, c) || !m.waitPrimed(ctx, c) {
			return
		}
		singleton := c.placement == PlacementSingleton
		client := m.client
		var term int64 // the fencing token's revision, 0 if unfenced
		if singleton {
			// Count this run before the final look at the lease, so a
			// SetLeader(false) either sees it and waits, or happened
			// first and is seen here.
			m.singletonsMu.Lock()
			m.singletons++
			m.singletonsMu.Unlock()
			changed := m.lease.Changed()
			if !m.lease.Held() {
				m.singletonDone()
				continue
			}
			if f, ok := m.lease.(Fencer); ok {
				key, rev, held := f.Fence()
				if !held {
					// Lost between the two looks; Held says so too
					// next time round. Do not spin on a lease whose
					// Held and Fence disagree for longer.
					m.singletonDone()
					select {
					case <-changed:
					case <-time.After(50 * time.Millisecond):
					case <-ctx.Done():
						return
					}
					continue
				}
				client, term = newFencedClient(m.client, key, rev), rev
			}
			if term != 0 {
				m.logger.Info("singleton controller starting", "controller", c.name, "term", term)
			} else {
				m.logger.Info("singleton controller starting", "controller", c.name)
			}
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if singleton {
				defer m.singletonDone()
			}
			m.runController(runCtx, c, client)
		}()
		m.waitDisallowed(ctx, c, term)
		cancel()
		<-done
		if singleton {
			if term != 0 {
				m.logger.Info("singleton controller stopped", "controller", c.name, "term", term)
			} else {
				m.logger.Info("singleton controller stopped", "controller", c.name)
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

func (m *Manager) singletonDone() {
	m.singletonsMu.Lock()
	m.singletons--
	m.stopped.Broadcast()
	m.singletonsMu.Unlock()
}

func (m *Manager) waitAllowed(ctx context.Context, c *Controller) bool {
	if c.placement == PlacementEachServer {
		return ctx.Err() == nil
	}
	return m.waitLeader(ctx)
}

// waitDisallowed returns when c may no longer run: ctx ended or, for a
// singleton, the lease was lost or (term not 0) its term is no longer term.
func (m *Manager) waitDisallowed(ctx context.Context, c *Controller, term int64) {
	if c.placement == PlacementEachServer {
		<-ctx.Done()
		return
	}
	f, fenced := m.lease.(Fencer)
	for {
		changed := m.lease.Changed()
		if !m.lease.Held() {
			m.logger.Info("leader lease lost; stopping controller", "controller", c.name)
			return
		}
		if fenced && term != 0 {
			if _, rev, ok := f.Fence(); !ok || rev != term {
				m.logger.Info("leader term changed; restarting controller", "controller", c.name, "term", term)
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}

// watchedGroupVersions returns, per Group+Kind the controllers manage or
// watch, the distinct GroupVersions they name, in registration order.
func watchedGroupVersions(controllers []*Controller) [][]*pbresource.Type {
	var out [][]*pbresource.Type
	at := map[resource.UnversionedType]int{}
	seen := map[string]bool{}
	for _, c := range controllers {
		for _, t := range c.types() {
			if seen[resource.TypeString(t)] {
				continue
			}
			seen[resource.TypeString(t)] = true
			key := resource.UnversionedTypeFrom(t)
			i, ok := at[key]
			if !ok {
				i = len(out)
				at[key] = i
				out = append(out, nil)
			}
			out[i] = append(out[i], t)
		}
	}
	return out
}

// countdown returns a function that closes done and calls then on its
// n-th call; later calls do nothing.
func countdown(n int, done chan struct{}, then func()) func() {
	var mu sync.Mutex
	return func() {
		mu.Lock()
		defer mu.Unlock()
		if n--; n == 0 {
			close(done)
			then()
		}
	}
}

func (m *Manager) waitPrimed(ctx context.Context, c *Controller) bool {
	var chans []chan struct{}
	for _, t := range c.types() {
		chans = append(chans, m.primed[resource.UnversionedTypeFrom(t)])
	}
	return waitClosed(ctx, chans)
}

// dispatcher returns the cache sink of one type: it notes a live change
// of a managed type among the recent ones, and hands each change to the
// running controllers that manage or watch the type.
func (m *Manager) dispatcher(typ resource.UnversionedType) func(cache.Event) {
	recent := m.recent[typ] // nil for a type no controller manages
	return func(ev cache.Event) {
		if recent != nil && !ev.Snapshot {
			recent.add(ev.Resource.Id)
		}
		m.subsMu.RLock()
		subs := m.subs[typ]
		m.subsMu.RUnlock()
		for _, s := range subs {
			s.deliver(typ, ev)
		}
	}
}

func (m *Manager) subscribe(s *subscription) {
	m.subsMu.Lock()
	defer m.subsMu.Unlock()
	for _, key := range s.types() {
		m.subs[key] = append(append([]*subscription(nil), m.subs[key]...), s)
	}
}

func (m *Manager) unsubscribe(s *subscription) {
	m.subsMu.Lock()
	defer m.subsMu.Unlock()
	for _, key := range s.types() {
		var kept []*subscription
		for _, other := range m.subs[key] {
			if other != s {
				kept = append(kept, other)
			}
		}
		m.subs[key] = kept
	}
}
