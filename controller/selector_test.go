package controller_test

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/selector"
)

// writeLabelled writes the resource id with data and metadata labels.
func writeLabelled(t *testing.T, client pbresource.ResourceServiceClient, id *pbresource.ID, data *anypb.Any, labels map[string]string) {
	t.Helper()
	_, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data, Metadata: labels}})
	require.NoError(t, err)
}

func barData(t *testing.T) *anypb.Any {
	data, err := anypb.New(&pbfoov1.Bar{Baz: "b"})
	require.NoError(t, err)
	return data
}

func zipData(t *testing.T) *anypb.Any {
	data, err := anypb.New(&pbfoov1.Zip{Zap: "z"})
	require.NoError(t, err)
	return data
}

// selectorSpy records the label selectors the cache's watches and Lists
// send.
type selectorSpy struct {
	pbresource.ResourceServiceClient
	mu   sync.Mutex
	sent []string
}

func (s *selectorSpy) WatchList(ctx context.Context, req *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	s.mu.Lock()
	s.sent = append(s.sent, req.Type.Kind+" "+req.LabelSelector)
	s.mu.Unlock()
	return s.ResourceServiceClient.WatchList(ctx, req, opts...)
}

func (s *selectorSpy) List(ctx context.Context, req *pbresource.ListRequest, opts ...grpc.CallOption) (*pbresource.ListResponse, error) {
	s.mu.Lock()
	s.sent = append(s.sent, req.Type.Kind+" "+req.LabelSelector)
	s.mu.Unlock()
	return s.ResourceServiceClient.List(ctx, req, opts...)
}

// eventLog records the cache events of watched resources, as
// "Upserted name" or "Deleted name".
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) filter(ev cache.Event) bool {
	kind := "Upserted"
	if ev.Kind == cache.Deleted {
		kind = "Deleted"
	}
	l.mu.Lock()
	l.events = append(l.events, kind+" "+ev.Resource.Id.Name)
	l.mu.Unlock()
	return true
}

func (l *eventLog) has(event string) bool {
	return slices.Contains(l.all(), event)
}

func (l *eventLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

func cachedNames(t *testing.T, c cache.ReadOnlyCache, typ *pbresource.Type) []string {
	t.Helper()
	all, err := c.All(typ)
	require.NoError(t, err)
	var out []string
	for _, res := range all {
		out = append(out, res.Id.Name)
	}
	sort.Strings(out)
	return out
}

// eachServer runs test as subtests against a Loom service ("loom") and a
// Consul-like one ("consul"), each with the example types.
func eachServer(t *testing.T, test func(t *testing.T, svc *resourcetest.Service, consul bool)) {
	for _, consul := range []bool{false, true} {
		name := "loom"
		opts := []resourcetest.ServiceOption{resourcetest.WithTypes(foo.RegisterTypes)}
		if consul {
			name = "consul"
			opts = append(opts, resourcetest.ConsulLike(0))
		}
		t.Run(name, func(t *testing.T) { test(t, resourcetest.StartService(t, opts...), consul) })
	}
}

// TestSelectorCache checks that a controller with label selectors on its
// managed type and on a watched type caches, maps and reconciles only the
// matching resources, that a resource relabelled out of the selection
// leaves the cache (its mapper and filters see a deletion) and one
// relabelled in enters it; the same against a Loom server, which applies
// the selector, and a Consul-like one, which ignores it.
func TestSelectorCache(t *testing.T) {
	eachServer(t, func(t *testing.T, svc *resourcetest.Service, consul bool) {
		payments := map[string]string{"team": "payments"}
		other := map[string]string{"team": "search"}
		writeLabelled(t, svc.Client, barID("bar-in"), barData(t), payments)
		writeLabelled(t, svc.Client, barID("bar-out"), barData(t), other)
		writeLabelled(t, svc.Client, barID("bar-bare"), barData(t), nil)
		writeLabelled(t, svc.Client, zipID("zip-in"), zipData(t), payments)
		writeLabelled(t, svc.Client, zipID("zip-out"), zipData(t), other)

		spy := &selectorSpy{ResourceServiceClient: svc.Client}
		m := newManager(t, spy)
		sel := selector.MustParse("team = payments")
		var rec reconciled
		var zips eventLog
		m.MustRegister(controller.NewController("payments", foo.BarV1Type).
			WithSelector(foo.BarV1Type, sel).
			WithWatch(foo.ZipType, func(_ context.Context, _ reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
				return []reconcile.Request{{ID: barID("from-" + res.Id.Name)}}, nil
			}).
			WithSelector(foo.ZipType, sel).
			WithEventFilter(foo.ZipType, zips.filter).
			WithReconciler(&rec))
		m.SetLeader(true)
		runManager(t, m)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, m.WaitPrimed(ctx))

		require.Equal(t, []string{"bar-in"}, cachedNames(t, m.Cache(), foo.BarV1Type))
		require.Equal(t, []string{"zip-in"}, cachedNames(t, m.Cache(), foo.ZipType))
		require.Eventually(t, func() bool { return rec.has("bar-in") }, 10*time.Second, time.Millisecond)

		// Relabelled out: gone from the cache, and a deletion for the
		// watch's filters and mapper.
		writeLabelled(t, svc.Client, zipID("zip-in"), zipData(t), other)
		require.Eventually(t, func() bool { return zips.has("Deleted zip-in") && rec.has("from-zip-in") },
			10*time.Second, time.Millisecond, "zip-in was not deleted from the cache")
		require.Equal(t, []string(nil), cachedNames(t, m.Cache(), foo.ZipType))
		// Relabelled in: in the cache, mapped and reconciled.
		writeLabelled(t, svc.Client, zipID("zip-out"), zipData(t), payments)
		writeLabelled(t, svc.Client, barID("bar-bare"), barData(t), payments)
		require.Eventually(t, func() bool { return rec.has("from-zip-out", "bar-bare") }, 10*time.Second, time.Millisecond)
		require.Equal(t, []string{"bar-bare", "bar-in"}, cachedNames(t, m.Cache(), foo.BarV1Type))
		require.Equal(t, []string{"zip-out"}, cachedNames(t, m.Cache(), foo.ZipType))
		// Changes outside the selection are not seen at all; a marker
		// write inside it shows that the ones before it were handled.
		writeLabelled(t, svc.Client, zipID("zip-in"), zipData(t), map[string]string{"team": "other"})
		writeLabelled(t, svc.Client, barID("bar-out"), barData(t), map[string]string{"team": "other"})
		writeLabelled(t, svc.Client, zipID("zip-marker"), zipData(t), payments)
		require.Eventually(t, func() bool { return rec.has("from-zip-marker") }, 10*time.Second, time.Millisecond)

		require.False(t, rec.has("bar-out"), "a Bar outside the selection was reconciled")
		require.Equal(t, []string{"Deleted zip-in", "Upserted zip-out", "Upserted zip-marker"}, zips.all())

		spy.mu.Lock()
		defer spy.mu.Unlock()
		require.NotEmpty(t, spy.sent)
		for _, s := range spy.sent {
			require.True(t, strings.HasSuffix(s, " team=payments"), "a request without the selector: %q", s)
		}
	})
}

// runPayments runs a Manager with a controller of the Bars labelled
// team=payments, and returns it, the log of its Bar events and what it
// reconciled.
func runPayments(t *testing.T, client pbresource.ResourceServiceClient) (*controller.Manager, *eventLog, *reconciled) {
	t.Helper()
	m := newManager(t, client)
	bars, rec := &eventLog{}, &reconciled{}
	m.MustRegister(controller.NewController("payments", foo.BarV1Type).
		WithSelector(foo.BarV1Type, selector.MustParse("team=payments")).
		WithEventFilter(foo.BarV1Type, bars.filter).
		WithReconciler(rec))
	m.SetLeader(true)
	runManager(t, m)
	return m, bars, rec
}

// TestSelectorStaleSnapshot checks that, against a Consul-like server that
// serves a stale snapshot and then replays the changes after it, a replayed
// state outside the selection does not remove a resource the confirming
// List found inside it.
func TestSelectorStaleSnapshot(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes), resourcetest.ConsulLike(time.Hour))
	payments := map[string]string{"team": "payments"}
	writeLabelled(t, svc.Client, barID("flip"), barData(t), payments)
	// Another watch, open all along: its view (flip selected) is what
	// later watches are served, followed by the changes after it.
	openView(t, svc.Client)
	writeLabelled(t, svc.Client, barID("flip"), barData(t), map[string]string{"team": "search"})
	writeLabelled(t, svc.Client, barID("flip"), barData(t), payments)
	current := readBar(t, svc.Client, barID("flip")).Version

	m, bars, rec := runPayments(t, svc.Client)
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	require.NoError(t, m.WaitPrimed(pctx))
	writeLabelled(t, svc.Client, barID("marker"), barData(t), payments)
	require.Eventually(t, func() bool { return rec.has("marker") }, 10*time.Second, time.Millisecond)

	require.NotContains(t, bars.all(), "Deleted flip", "a replayed state outside the selection removed a selected resource")
	res, err := m.Cache().GetByID(barID("flip"))
	require.NoError(t, err)
	require.NotNil(t, res, "flip vanished from the cache")
	require.Equal(t, current, res.Version)
}

// TestSelectorAcrossRewatch checks that changes made while the cache's
// watch is broken, into and out of the selection, reach the cache once it
// watches again (Loom resumes the watch; Consul sends a new snapshot).
func TestSelectorAcrossRewatch(t *testing.T) {
	eachServer(t, func(t *testing.T, svc *resourcetest.Service, consul bool) {
		payments := map[string]string{"team": "payments"}
		other := map[string]string{"team": "search"}
		writeLabelled(t, svc.Client, barID("leaves"), barData(t), payments)
		writeLabelled(t, svc.Client, barID("enters"), barData(t), other)
		client := &breakableClient{ResourceServiceClient: svc.Client}
		m, bars, rec := runPayments(t, client)
		require.Eventually(t, func() bool { return rec.has("leaves") }, 10*time.Second, time.Millisecond)

		client.breakStreams()
		writeLabelled(t, svc.Client, barID("leaves"), barData(t), other)
		writeLabelled(t, svc.Client, barID("enters"), barData(t), payments)
		writeLabelled(t, svc.Client, barID("outside"), barData(t), other)
		client.reopen()
		require.Eventually(t, func() bool { return rec.has("enters") && bars.has("Deleted leaves") }, 10*time.Second, time.Millisecond)
		require.Equal(t, []string{"enters"}, cachedNames(t, m.Cache(), foo.BarV1Type))
		require.ElementsMatch(t, []string{"Deleted leaves", "Upserted enters"}, bars.all())
		rewatch, ok := client.stream(1)
		require.True(t, ok)
		require.NotEmpty(t, rewatch.since, "the cache did not resume its watch")
		if !consul {
			require.Zero(t, rewatch.newSnap, "Loom could not resume the watch")
		}
	})
}

// TestSelectorsMustAgree checks that the controllers of a Manager that
// manage or watch a type must select the same resources of it, and that a
// selector on a type the controller neither manages nor watches is a
// misconfiguration.
func TestSelectorsMustAgree(t *testing.T) {
	svc := startService(t)
	m := newManager(t, svc.Client)
	noop := reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })
	mapper := func(context.Context, reconcile.Runtime, *pbresource.Resource) ([]reconcile.Request, error) {
		return nil, nil
	}
	payments := selector.MustParse("team=payments, tier in (gold)")

	err := m.Register(controller.NewController("stray", foo.BarV1Type).WithReconciler(noop).
		WithSelector(foo.ZipType, payments))
	require.ErrorContains(t, err, `controller "stray" is misconfigured`)
	require.ErrorContains(t, err, "WithSelector(foo.v1.Zip): not the managed type nor a watched one")
	err = m.Register(controller.NewController("twice", foo.BarV1Type).WithReconciler(noop).
		WithSelector(foo.BarV1Type, payments).WithSelector(foo.BarV1Type, payments))
	require.ErrorContains(t, err, "WithSelector(foo.v1.Bar): the type has a selector already")

	require.NoError(t, m.Register(controller.NewController("bars", foo.BarV1Type).WithReconciler(noop).
		WithSelector(foo.BarV1Type, payments)))
	// The same selection, written otherwise: the canonical forms agree.
	require.NoError(t, m.Register(controller.NewController("same", foo.BarV2Type).WithReconciler(noop).
		WithSelector(foo.BarV2Type, selector.MustParse("tier in (gold,gold),team==payments"))))

	err = m.Register(controller.NewController("all-bars", foo.ZipType).WithReconciler(noop).
		WithWatch(foo.BarV1Type, mapper))
	require.EqualError(t, err, `controller "all-bars" selects every resource (no selector) of type foo.Bar, `+
		`but controller "bars" selects the resources matching "team=payments,tier in (gold)"; `+
		`the controllers of a Manager share its cache, so they must select the same resources of a type (WithSelector)`)
	err = m.Register(controller.NewController("other-bars", foo.ZipType).WithReconciler(noop).
		WithOwned(foo.BarV1Type).WithSelector(foo.BarV1Type, selector.MustParse("team=search")))
	require.ErrorContains(t, err, `controller "other-bars" selects the resources matching "team=search" of type foo.Bar, but controller "bars" selects`)
	// A failed registration leaves nothing behind: the type is free for a
	// controller without a selector.
	require.NoError(t, m.Register(controller.NewController("zips", foo.ZipType).WithReconciler(noop)))
}
