package controller_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
)

// watchCounter counts WatchList calls by type and can break every open
// stream, as a lost connection would.
type watchCounter struct {
	pbresource.ResourceServiceClient
	mu      sync.Mutex
	calls   map[string]int
	cancels []context.CancelFunc
}

func newWatchCounter(c pbresource.ResourceServiceClient) *watchCounter {
	return &watchCounter{ResourceServiceClient: c, calls: map[string]int{}}
}

func (w *watchCounter) WatchList(ctx context.Context, req *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	ctx, cancel := context.WithCancel(ctx)
	w.mu.Lock()
	w.calls[resource.TypeString(req.Type)]++
	w.cancels = append(w.cancels, cancel)
	w.mu.Unlock()
	return w.ResourceServiceClient.WatchList(ctx, req, opts...)
}

func (w *watchCounter) count() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.calls {
		out[k] = v
	}
	return out
}

// breakAll ends every stream opened so far.
func (w *watchCounter) breakAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.cancels {
		c()
	}
	w.cancels = nil
}

func writeBarV2(t testing.TB, client pbresource.ResourceServiceClient, name string) *pbresource.Resource {
	t.Helper()
	data, err := anypb.New(&pbfoov2.Bar{Baz: name})
	require.NoError(t, err)
	id := barID(name)
	id.Type = foo.BarV2Type
	rsp, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}})
	require.NoError(t, err)
	return rsp.Resource
}

// reconciled records the names a controller reconciled.
type reconciled struct {
	mu    sync.Mutex
	names map[string]bool
}

func (r *reconciled) Reconcile(_ context.Context, _ reconcile.Runtime, req reconcile.Request) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names == nil {
		r.names = map[string]bool{}
	}
	r.names[req.ID.Name] = true
	return nil
}

func (r *reconciled) has(names ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, n := range names {
		if !r.names[n] {
			return false
		}
	}
	return true
}

// TestGroupVersionWatches checks that controllers on two GroupVersions of
// a type see every resource of it, whether the server returns every
// GroupVersion on one stream (Loom: one stream, no duplicate) or keeps
// only the requested one (Consul: one stream per GroupVersion).
func TestGroupVersionWatches(t *testing.T) {
	for _, consul := range []bool{false, true} {
		name := "loom"
		opts := []resourcetest.ServiceOption{resourcetest.WithTypes(foo.RegisterTypes)}
		if consul {
			name = "consul"
			opts = append(opts, resourcetest.ConsulLike(0))
		}
		t.Run(name, func(t *testing.T) {
			svc := resourcetest.StartService(t, opts...)
			writeBar(t, svc.Client, "v1-a", "a", nil)
			writeBar(t, svc.Client, "v1-b", "b", nil)
			writeBarV2(t, svc.Client, "v2-a")
			client := newWatchCounter(svc.Client)
			m := newManager(t, client)
			var onV1, onV2 reconciled
			// The v2 controller first: the type's first stream is for v2.
			m.MustRegister(controller.NewController("on-v2", foo.BarV2Type).WithReconciler(&onV2))
			m.MustRegister(controller.NewController("on-v1", foo.BarV1Type).WithReconciler(&onV1))
			m.SetLeader(true)
			runManager(t, m)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, m.WaitPrimed(ctx))
			for _, name := range []string{"v1-a", "v1-b", "v2-a"} {
				res, err := m.Cache().GetByID(barID(name))
				require.NoError(t, err)
				require.NotNil(t, res, "%s is missing from the primed cache", name)
			}

			require.Eventually(t, func() bool { return onV1.has("v1-a", "v1-b", "v2-a") && onV2.has("v1-a", "v1-b", "v2-a") },
				10*time.Second, time.Millisecond, "a controller did not see every resource of its type")
			// Changes at either GroupVersion after priming reach the cache.
			writeBar(t, svc.Client, "v1-late", "l", nil)
			writeBarV2(t, svc.Client, "v2-late")
			require.Eventually(t, func() bool { return onV1.has("v1-late", "v2-late") }, 10*time.Second, time.Millisecond)

			got := client.count()
			if consul {
				require.Equal(t, 1, got[resource.TypeString(foo.BarV1Type)], "streams: %v", got)
				require.Equal(t, 1, got[resource.TypeString(foo.BarV2Type)], "streams: %v", got)
			} else {
				require.Equal(t, map[string]int{resource.TypeString(foo.BarV2Type): 1}, got, "Loom needs one stream per Group+Kind")
			}
		})
	}
}

// TestStaleSnapshot checks that a cache fed by a server that serves stale
// snapshots (Consul, while another watch of the type is open) is primed
// with every resource, and that a re-watch served a stale snapshot does
// not report live resources as deleted.
func TestStaleSnapshot(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes), resourcetest.ConsulLike(time.Hour))
	writeBar(t, svc.Client, "old", "o", nil)
	// Another watch of the type, open all along: its snapshot (with only
	// "old") is the view later watches are served.
	openView(t, svc.Client)
	writeBar(t, svc.Client, "new-1", "1", nil)
	writeBar(t, svc.Client, "new-2", "2", nil)
	writeBar(t, svc.Client, "old", "changed", nil) // the view has its first version

	client := newWatchCounter(svc.Client)
	m := newManager(t, client)
	var deleted, regressed sync.Map
	var watchGhost atomic.Pointer[atomic.Int64]
	var rec reconciled
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithReconciler(&rec).
		WithEventFilter(foo.BarV1Type, func(ev cache.Event) bool {
			if g := watchGhost.Load(); g != nil && ev.Resource.Id.Name == "ghost" {
				g.Add(1)
			}
			if ev.Kind == cache.Deleted {
				deleted.Store(ev.Resource.Id.Name, true)
			}
			if ev.Kind == cache.Upserted && ev.Old != nil && versionNumber(t, ev.Resource.Version) <= versionNumber(t, ev.Old.Version) {
				regressed.Store(ev.Resource.Id.Name, ev.Old.Version+" -> "+ev.Resource.Version)
			}
			return true
		}))
	m.SetLeader(true)
	runManager(t, m)
	pctx, pcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer pcancel()
	require.NoError(t, m.WaitPrimed(pctx))
	for _, name := range []string{"old", "new-1", "new-2"} {
		res, err := m.Cache().GetByID(barID(name))
		require.NoError(t, err)
		require.NotNil(t, res, "%s is missing from the primed cache", name)
	}

	// The controller runs (it sees the cache's events from now on).
	require.Eventually(t, func() bool { return rec.has("old", "new-1", "new-2") }, 10*time.Second, time.Millisecond)

	// A resource created and deleted after the view: the re-watch's
	// stale stream replays both, after the List that confirms its
	// snapshot, which is newer ("old" was written after them).
	writeBar(t, svc.Client, "ghost", "g", nil)
	_, err := svc.Client.Delete(context.Background(), &pbresource.DeleteRequest{Id: barID("ghost")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		res, _ := m.Cache().GetByID(barID("ghost"))
		_, seen := deleted.Load("ghost")
		return res == nil && seen // the runtime dispatched its deletion
	}, 10*time.Second, time.Millisecond)
	writeBar(t, svc.Client, "old", "after the ghost", nil)
	oldVersion := readBar(t, svc.Client, barID("old")).Version
	require.Eventually(t, func() bool {
		res, _ := m.Cache().GetByID(barID("old"))
		return res != nil && res.Version == oldVersion
	}, 10*time.Second, time.Millisecond)
	deleted.Delete("ghost")
	var ghost atomic.Int64
	watchGhost.Store(&ghost)

	// A re-watch is served the stale view again.
	before := client.count()[resource.TypeString(foo.BarV1Type)]
	client.breakAll()
	require.Eventually(t, func() bool { return client.count()[resource.TypeString(foo.BarV1Type)] > before }, 10*time.Second, time.Millisecond)
	writeBar(t, svc.Client, "marker", "m", nil) // after the re-watch: its event means the re-watch was handled
	require.Eventually(t, func() bool {
		res, _ := m.Cache().GetByID(barID("marker"))
		return res != nil
	}, 10*time.Second, time.Millisecond)
	deleted.Range(func(k, _ any) bool {
		t.Errorf("a live resource was reported deleted: %v", k)
		return true
	})
	require.Zero(t, watchGhost.Load().Load(), "a resource deleted before the re-watch came back for a while")
	regressed.Range(func(k, v any) bool {
		t.Errorf("%v went back to an older version: %v", k, v)
		return true
	})
	res, err := m.Cache().GetByID(barID("old"))
	require.NoError(t, err)
	require.Equal(t, readBar(t, svc.Client, barID("old")).Version, res.Version, "the cache holds an older version")
	for _, name := range []string{"old", "new-1", "new-2"} {
		res, err := m.Cache().GetByID(barID(name))
		require.NoError(t, err)
		require.NotNil(t, res, "%s vanished from the cache", name)
	}
}

// openView opens a watch of every Bar, read up to its EndOfSnapshot and
// left open until the test ends: on a Consul-like service that serves
// stale snapshots, its snapshot is the view later watches are served.
func openView(t *testing.T, client pbresource.ResourceServiceClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	view, err := client.WatchList(ctx, &pbresource.WatchListRequest{Type: foo.BarV1Type,
		Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard}})
	require.NoError(t, err)
	for {
		ev, err := view.Recv()
		require.NoError(t, err)
		if ev.GetEndOfSnapshot() != nil {
			return
		}
	}
}

func versionNumber(t *testing.T, v string) uint64 {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Errorf("version %q is not a number", v)
	}
	return n
}

// TestLastFinalizerAgainstConsul checks that a controller that removes its
// finalizer with finalizer.EnsureFinalizerRemoved gets the resource
// deleted on a server that deletes it with its last finalizer (Loom) and on
// one that keeps it, marked, until a further Delete (Consul): the helper
// issues that Delete.
func TestLastFinalizerAgainstConsul(t *testing.T) {
	for _, consul := range []bool{false, true} {
		name := "loom"
		opts := []resourcetest.ServiceOption{resourcetest.WithTypes(foo.RegisterTypes)}
		if consul {
			name = "consul"
			opts = append(opts, resourcetest.ConsulLike(time.Second))
		}
		t.Run(name, func(t *testing.T) {
			svc := resourcetest.StartService(t, opts...)
			m := newManager(t, svc.Client)
			m.MustRegister(controller.NewController("cleanup", foo.BarV1Type).
				WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
					res, err := rt.Cache.GetByID(req.ID)
					if err != nil || res == nil {
						return err
					}
					if !finalizer.IsMarkedForDeletion(res) {
						_, err = finalizer.EnsureHasFinalizer(ctx, rt, res, "cleanup")
						return err
					}
					_, err = finalizer.EnsureFinalizerRemoved(ctx, rt, res, "cleanup")
					return err
				})))
			m.SetLeader(true)
			runManager(t, m)
			writeBar(t, svc.Client, "doomed", "d", nil)
			c := resourcetest.NewClient(svc.Client)
			require.Eventually(t, func() bool {
				rsp, err := svc.Client.Read(context.Background(), &pbresource.ReadRequest{Id: barID("doomed")})
				return err == nil && finalizer.HasFinalizer(rsp.Resource, "cleanup")
			}, 10*time.Second, time.Millisecond)
			_, err := svc.Client.Delete(context.Background(), &pbresource.DeleteRequest{Id: barID("doomed")})
			require.NoError(t, err)
			c.WaitForDeletion(t, barID("doomed"))
		})
	}
}

// unversionedServer is a Loom server's client whose WatchList snapshots
// carry no version, as a server that cannot tell one (so the cache
// confirms them by List), and that records every List request.
type unversionedServer struct {
	pbresource.ResourceServiceClient
	mu    sync.Mutex
	lists []*pbresource.ListRequest
}

func (u *unversionedServer) List(ctx context.Context, req *pbresource.ListRequest, opts ...grpc.CallOption) (*pbresource.ListResponse, error) {
	u.mu.Lock()
	u.lists = append(u.lists, proto.Clone(req).(*pbresource.ListRequest)) // the caller reuses req
	u.mu.Unlock()
	return u.ResourceServiceClient.List(ctx, req, opts...)
}

func (u *unversionedServer) WatchList(ctx context.Context, req *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	inner := &pbresource.WatchListRequest{Type: req.Type, Tenancy: req.Tenancy, NamePrefix: req.NamePrefix}
	s, err := u.ResourceServiceClient.WatchList(ctx, inner, opts...)
	return unversionedStream{s}, err
}

type unversionedStream struct {
	grpc.ServerStreamingClient[pbresource.WatchEvent]
}

func (s unversionedStream) Recv() (*pbresource.WatchEvent, error) {
	ev, err := s.ServerStreamingClient.Recv()
	if ev.GetEndOfSnapshot() != nil {
		// Events are shared and immutable: a new one, without version.
		ev = &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{}}}
	}
	return ev, err
}

// TestConfirmReadsPages checks that the List confirming an unversioned
// snapshot reads pages from a server that has them, and that the cache
// gets all of them.
func TestConfirmReadsPages(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	const n = 2500
	for i := range n {
		writeBar(t, svc.Client, "bar-"+strconv.Itoa(i), "x", nil)
	}
	client := &unversionedServer{ResourceServiceClient: svc.Client}
	m := newManager(t, client)
	m.MustRegister(controller.NewController("on-v1", foo.BarV1Type).WithReconciler(&reconciled{}))
	m.SetLeader(true)
	runManager(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, m.WaitPrimed(ctx))
	all, err := m.Cache().All(foo.BarV1Type)
	require.NoError(t, err)
	require.Len(t, all, n)

	client.mu.Lock()
	defer client.mu.Unlock()
	require.GreaterOrEqual(t, len(client.lists), 3, "2,500 resources in pages of at most 1,000")
	for i, req := range client.lists[:3] {
		require.NotZero(t, req.PageSize, "List %d asks for pages", i)
		require.Equal(t, i > 0, req.PageToken != "", "List %d: page token %q", i, req.PageToken)
	}
}
