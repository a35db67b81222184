package resourcetest

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"

	"google.golang.org/grpc/metadata"
)

// LogLevelEnv names the environment variable that sets the level of the
// controller logs the kit sends to the test log ("info" when unset; e.g.
// LOOM_TEST_LOG_LEVEL=debug go test -v ./...).
const LogLevelEnv = "LOOM_TEST_LOG_LEVEL"

// stopTimeout bounds how long the end of a test waits for a Manager to stop.
const stopTimeout = 10 * time.Second

// testLogWriter passes log lines to t.Logf until it is closed; afterwards
// (when the test may be over) lines are dropped, since logging to a
// finished test panics.
type testLogWriter struct {
	mu     sync.Mutex
	t      logger
	closed bool
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.closed && w.t != nil {
		w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testLogWriter) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
}

// testLogger returns a logger that writes to t's log (when t can log) and
// stops writing when the test's cleanups run.
func testLogger(t T, name string) hclog.Logger {
	level := hclog.LevelFromString(os.Getenv(LogLevelEnv))
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	lg, _ := t.(logger)
	var out io.Writer = io.Discard
	if lg != nil {
		w := &testLogWriter{t: lg}
		t.Cleanup(w.close)
		out = w
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Level: level, Output: out})
}

// RunOption configures RunControllersWith.
type RunOption func(*runConfig)

type runConfig struct {
	controllers []*controller.Controller
	managerOpts []controller.ManagerOption
}

// Controllers registers controllers on the Manager RunControllersWith runs.
func Controllers(controllers ...*controller.Controller) RunOption {
	return func(c *runConfig) { c.controllers = append(c.controllers, controllers...) }
}

// WithManagerOptions passes opts to controller.NewManager, after the kit's
// own (a fast watch retry), so they override it.
func WithManagerOptions(opts ...controller.ManagerOption) RunOption {
	return func(c *runConfig) { c.managerOpts = append(c.managerOpts, opts...) }
}

// RunControllers registers controllers on a new Manager that talks to
// client, makes it the leader and runs it until the test ends; the test's
// cleanup waits for Run to return. It returns once the Manager's cache
// holds the first snapshot of every type the controllers manage or watch,
// so the controllers are starting by then. It fails t if a controller is
// misconfigured. The Manager is returned for its cache or to change its
// leadership. RunControllersWith also takes Manager options.
func RunControllers(t T, client pbresource.ResourceServiceClient, controllers ...*controller.Controller) *controller.Manager {
	t.Helper()
	return RunControllersWith(t, client, Controllers(controllers...))
}

// RunControllersWith is RunControllers configured by opts: the controllers
// come with Controllers, and WithManagerOptions passes options to the
// Manager (metrics, a lease, the watch retry). It fails t if an option or
// a controller is rejected. Under a lease given with controller.WithLease,
// the lease decides leadership.
func RunControllersWith(t T, client pbresource.ResourceServiceClient, opts ...RunOption) *controller.Manager {
	t.Helper()
	var cfg runConfig
	for _, o := range opts {
		o(&cfg)
	}
	mgrOpts := append([]controller.ManagerOption{controller.WithWatchRetry(time.Millisecond, 50*time.Millisecond)}, cfg.managerOpts...)
	mgr, err := controller.NewManager(client, testLogger(t, "controllers"), mgrOpts...)
	if err != nil {
		fatalf(t, "resourcetest: creating the controller manager: %v", err)
	}
	for _, c := range cfg.controllers {
		if err := mgr.Register(c); err != nil {
			fatalf(t, "resourcetest: registering a controller: %v", err)
		}
	}
	mgr.SetLeader(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Run(ctx) }()
	stop := func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("resourcetest: the controller manager stopped with an error: %v", err)
			}
		case <-time.After(stopTimeout):
			t.Errorf("resourcetest: the controller manager did not stop within %s of the test's end", stopTimeout)
		}
	}
	t.Cleanup(stop)
	primeCtx, primeCancel := context.WithTimeout(ctx, DefaultWaitTimeout)
	defer primeCancel()
	if err := mgr.WaitPrimed(primeCtx); err != nil {
		fatalf(t, "resourcetest: the controller manager's cache was not primed within %s: %v", DefaultWaitTimeout, err)
	}
	return mgr
}

// NewCache returns a cache prepared as a Manager would prepare it for ctrl
// (its managed and watched types, their indexes and its queries) and
// holding resources. It fails t if ctrl's declarations conflict or a
// resource is not of one of ctrl's types.
func NewCache(t T, ctrl *controller.Controller, resources ...*pbresource.Resource) *cache.Cache {
	t.Helper()
	c, err := cacheFor(ctrl.Describe())
	if err != nil {
		fatalf(t, "resourcetest: preparing a cache for controller %q: %v", ctrl.Name(), err)
	}
	for _, res := range resources {
		if _, err := c.Upsert(resource.Clone(res)); err != nil {
			fatalf(t, "resourcetest: adding %s to the cache of controller %q: %v", resource.IDString(res.GetId()), ctrl.Name(), err)
		}
	}
	return c
}

func cacheFor(d controller.Description) (*cache.Cache, error) {
	c := cache.New()
	if err := c.AddType(d.ManagedType, d.Indexes...); err != nil {
		return nil, err
	}
	for _, w := range d.Watches {
		if err := c.AddType(w.Type, w.Indexes...); err != nil {
			return nil, err
		}
	}
	for _, q := range d.Queries {
		if err := c.AddQuery(q.Name, q.Query); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// ControllerHarness runs the parts of one controller by hand, without a
// Manager: one Reconcile, one Initialize or one dependency mapper call at
// a time, against a cache the test prepares and a real ResourceService.
// It suits table tests of a reconciler: write the starting state, Sync,
// Reconcile, then check the service with Client.
//
// Nothing updates the cache on its own. Write and Upsert put resources in
// it, Sync reloads it from the service; what the reconciler writes reaches
// the service but not the cache until the next Sync.
type ControllerHarness struct {
	// Client is the service the reconciler writes to, with the kit's checks.
	Client *Client
	// Cache is the controller's cache, read by the reconciler and mappers.
	Cache *cache.Cache
	// Logger is the logger the reconciler and mappers get (the test log).
	Logger hclog.Logger

	name string
	desc controller.Description
}

// NewControllerHarness prepares to run ctrl's parts against client, with
// an empty cache. It fails t if ctrl is misconfigured (as Register would).
func NewControllerHarness(t T, client pbresource.ResourceServiceClient, ctrl *controller.Controller) *ControllerHarness {
	t.Helper()
	// A throw-away Manager checks the controller exactly as Register does.
	mgr, err := controller.NewManager(client, nil)
	if err != nil {
		fatalf(t, "resourcetest: %v", err)
	}
	if err := mgr.Register(ctrl); err != nil {
		fatalf(t, "resourcetest: %v", err)
	}
	return &ControllerHarness{
		Client: NewClient(client),
		Cache:  NewCache(t, ctrl),
		Logger: testLogger(t, ctrl.Name()),
		name:   ctrl.Name(),
		desc:   ctrl.Describe(),
	}
}

// Runtime returns the Runtime the harness hands to the controller's code.
func (h *ControllerHarness) Runtime() reconcile.Runtime {
	return reconcile.Runtime{Client: h.Client.ResourceServiceClient, Logger: h.Logger, Cache: h.Cache}
}

// Write writes the resource b declares to the service (see
// ResourceBuilder.Write), puts the stored result in the cache when it is of
// one of the controller's types and its selector (WithSelector) selects
// it, removes it from the cache when it does not, and returns it.
func (h *ControllerHarness) Write(t T, b *ResourceBuilder) *pbresource.Resource {
	t.Helper()
	res := b.Write(t, h.Client)
	if !h.Cache.HasType(res.Id.Type) {
		return res
	}
	if h.selectorOf(res.Id.Type).Matches(res.Metadata) {
		h.Upsert(t, res)
	} else if _, err := h.Cache.Delete(res.Id); err != nil {
		fatalf(t, "resourcetest: removing %s from the cache of controller %q: %v", resource.IDString(res.GetId()), h.name, err)
	}
	return res
}

// selectorOf returns the selector the controller declared for typ.
func (h *ControllerHarness) selectorOf(typ *pbresource.Type) selector.Selector {
	if resource.EqualUnversionedType(typ, h.desc.ManagedType) {
		return h.desc.Selector
	}
	for _, w := range h.desc.Watches {
		if resource.EqualUnversionedType(typ, w.Type) {
			return w.Selector
		}
	}
	return selector.Everything()
}

// Upsert puts resources (copies) in the cache only, leaving the service
// alone: the way to test a reconciler against a cache that lags behind the
// service.
func (h *ControllerHarness) Upsert(t T, resources ...*pbresource.Resource) {
	t.Helper()
	for _, res := range resources {
		if _, err := h.Cache.Upsert(resource.Clone(res)); err != nil {
			fatalf(t, "resourcetest: adding %s to the cache of controller %q: %v", resource.IDString(res.GetId()), h.name, err)
		}
	}
}

// Sync makes the cache hold exactly what the service holds now, for every
// type the controller manages or watches (only what its selectors select),
// as a Manager's cache does once primed.
func (h *ControllerHarness) Sync(t T) {
	t.Helper()
	types := []*pbresource.Type{h.desc.ManagedType}
	for _, w := range h.desc.Watches {
		types = append(types, w.Type)
	}
	for _, typ := range types {
		snapshot, versioned, err := h.snapshot(typ)
		if err != nil {
			fatalf(t, "resourcetest: loading %s into the cache: %v", resource.TypeString(typ), err)
		}
		replace := h.Cache.Replace
		if !versioned {
			// Consul (or ConsulLike): the snapshot may be stale and holds
			// only typ's GroupVersion; a consistent List is current.
			if snapshot, err = h.list(typ); err != nil {
				fatalf(t, "resourcetest: loading %s into the cache: %v", resource.TypeString(typ), err)
			}
			replace = h.Cache.ReplaceGroupVersion
		}
		sel := h.selectorOf(typ)
		selected := snapshot[:0]
		for _, res := range snapshot {
			if sel.Matches(res.Metadata) {
				selected = append(selected, res)
			}
		}
		snapshot = selected
		if _, err := replace(typ, snapshot); err != nil {
			fatalf(t, "resourcetest: loading %s into the cache: %v", resource.TypeString(typ), err)
		}
	}
}

// list reads every resource of typ (any tenancy) with a consistent List.
func (h *ControllerHarness) list(typ *pbresource.Type) ([]*pbresource.Resource, error) {
	ctx, cancel := context.WithTimeout(context.Background(), h.Client.timeout)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
	rsp, err := h.Client.List(ctx, &pbresource.ListRequest{
		Type:    typ,
		Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard},
	})
	return rsp.GetResources(), err
}

// snapshot reads every resource of typ (any tenancy, any GroupVersion)
// through WatchList, as the Manager's cache does, and reports whether the
// snapshot came with the version it is consistent at (Loom).
func (h *ControllerHarness) snapshot(typ *pbresource.Type) ([]*pbresource.Resource, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), h.Client.timeout)
	defer cancel()
	stream, err := h.Client.WatchList(ctx, &pbresource.WatchListRequest{
		Type:    typ,
		Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard},
	})
	if err != nil {
		return nil, false, err
	}
	var out []*pbresource.Resource
	for {
		ev, err := stream.Recv()
		if err != nil {
			return nil, false, err
		}
		switch e := ev.Event.(type) {
		case *pbresource.WatchEvent_Upsert_:
			out = append(out, e.Upsert.Resource)
		case *pbresource.WatchEvent_EndOfSnapshot_:
			return out, e.EndOfSnapshot.GetVersion() != "", nil
		default:
			return nil, false, fmt.Errorf("unexpected %T before the end of the snapshot", e)
		}
	}
}

// Reconcile runs the controller's reconciler once for the resource id and
// returns its error (reconcile.RequeueAfter and RequeueNow included).
func (h *ControllerHarness) Reconcile(t T, id *pbresource.ID) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), h.Client.timeout)
	defer cancel()
	return h.desc.Reconciler.Reconcile(ctx, h.Runtime(), reconcile.Request{ID: resource.CloneID(id)})
}

// Initialize runs the controller's initializer once and returns its error;
// a controller without one returns nil.
func (h *ControllerHarness) Initialize(t T) error {
	t.Helper()
	if h.desc.Initializer == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), h.Client.timeout)
	defer cancel()
	return h.desc.Initializer.Initialize(ctx, h.Runtime())
}

// Map returns the requests a change to res would queue: for the managed
// type, a request for res itself (as the Manager does); for a watched type,
// what the watch's dependency mapper returns. It fails t when the
// controller neither manages nor watches res's type.
func (h *ControllerHarness) Map(t T, res *pbresource.Resource) ([]reconcile.Request, error) {
	t.Helper()
	typ := res.GetId().GetType()
	if resource.EqualUnversionedType(typ, h.desc.ManagedType) {
		return []reconcile.Request{{ID: resource.CloneID(res.Id)}}, nil
	}
	for _, w := range h.desc.Watches {
		if resource.EqualUnversionedType(typ, w.Type) {
			ctx, cancel := context.WithTimeout(context.Background(), h.Client.timeout)
			defer cancel()
			return w.Mapper(ctx, h.Runtime(), resource.Clone(res))
		}
	}
	fatalf(t, "resourcetest: controller %q neither manages nor watches %s", h.name, resource.TypeString(typ))
	return nil, nil
}
