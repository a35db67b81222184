package resourcetest

import (
	"context"
	"sync"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ConsulLike makes the service's Client behave like Consul's
// ResourceService where it differs from Loom's, so that code meant to run
// against either is tested against both without a Consul server:
//   - WatchList and List keep only resources of the requested GroupVersion
//     (Loom returns every GroupVersion of the Group+Kind).
//   - A WatchList snapshot is served from a view of the store up to
//     staleFor old while another watch of the same request is open, then
//     followed by the changes after that view, as Consul's event publisher
//     reuses a cached snapshot; Consul's is up to 10 s old.
//   - WatchList ignores since_version, bookmarks and batch_events, sends
//     no NewSnapshot and no batch of events, and its EndOfSnapshot and
//     Delete events carry no version.
//   - List and ListByOwner ignore page_size and page_token (they send
//     everything at once) and tell no version.
//   - List, ListByOwner and WatchList ignore label_selector: a client must
//     filter what it receives itself.
//   - Removing a marked resource's last finalizer leaves it in the store,
//     marked and without finalizers, until a further Delete.
//
// It wraps the real server's client; the server itself is unchanged.
func ConsulLike(staleFor time.Duration) ServiceOption {
	return func(c *serviceConfig) { c.consulStale, c.consulLike = staleFor, true }
}

// consulClient is a ResourceServiceClient that behaves like Consul's (see
// ConsulLike) in front of a Loom one.
type consulClient struct {
	pbresource.ResourceServiceClient
	staleFor time.Duration

	mu    sync.Mutex
	open  map[string]int        // open watches by watchKey
	views map[string]*watchView // newest snapshot by watchKey
}

// watchView is a snapshot a WatchList served, as of store version version.
type watchView struct {
	at        time.Time
	version   string
	resources []*pbresource.Resource
}

func newConsulClient(inner pbresource.ResourceServiceClient, staleFor time.Duration) *consulClient {
	return &consulClient{ResourceServiceClient: inner, staleFor: staleFor,
		open: make(map[string]int), views: make(map[string]*watchView)}
}

func watchKey(req *pbresource.WatchListRequest) string {
	t := req.GetTenancy()
	return resource.TypeString(req.GetType()) + "/" + t.GetPartition() + "/" + t.GetNamespace() + "/" + req.GetNamePrefix()
}

// List keeps only the requested GroupVersion, and knows no pages.
func (c *consulClient) List(ctx context.Context, req *pbresource.ListRequest, opts ...grpc.CallOption) (*pbresource.ListResponse, error) {
	inner := &pbresource.ListRequest{Type: req.Type, Tenancy: req.Tenancy, NamePrefix: req.NamePrefix}
	rsp, err := c.ResourceServiceClient.List(ctx, inner, opts...)
	if err != nil {
		return nil, err
	}
	rsp.Version = ""
	kept := rsp.Resources[:0]
	for _, res := range rsp.Resources {
		if res.GetId().GetType().GetGroupVersion() == req.GetType().GetGroupVersion() {
			kept = append(kept, res)
		}
	}
	rsp.Resources = kept
	hideAll(rsp.Resources)
	return rsp, nil
}

// WatchList serves a stale view when another watch of the request is
// open and its view is recent enough; otherwise a fresh snapshot, which
// becomes the view.
func (c *consulClient) WatchList(ctx context.Context, req *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	key := watchKey(req)
	c.mu.Lock()
	view := c.views[key]
	if c.open[key] == 0 || view == nil || time.Since(view.at) > c.staleFor {
		view = nil
	}
	c.open[key]++
	c.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			c.mu.Lock()
			c.open[key]--
			c.mu.Unlock()
		})
	}
	inner := &pbresource.WatchListRequest{Type: req.Type, Tenancy: req.Tenancy, NamePrefix: req.NamePrefix}
	if view != nil {
		inner.SinceVersion = view.version
	}
	stream, err := c.ResourceServiceClient.WatchList(ctx, inner, opts...)
	if err != nil {
		release()
		return nil, err
	}
	context.AfterFunc(ctx, release)
	s := &consulStream{ServerStreamingClient: stream, c: c, key: key, gv: req.GetType().GetGroupVersion(), release: release}
	if view != nil {
		s.queue = make([]*pbresource.WatchEvent, 0, len(view.resources)+1)
		for _, res := range view.resources {
			s.queue = append(s.queue, upsertEvent(res))
		}
		s.queue = append(s.queue, endOfSnapshot())
		s.done = true
	}
	return s, nil
}

// consulStream filters and rewrites a Loom stream into Consul's shape.
type consulStream struct {
	grpc.ServerStreamingClient[pbresource.WatchEvent]
	c       *consulClient
	key, gv string
	release func()

	queue    []*pbresource.WatchEvent // the stale view, sent first
	done     bool                     // the snapshot has been sent
	snapshot []*pbresource.Resource   // a fresh snapshot so far
}

func (s *consulStream) Recv() (*pbresource.WatchEvent, error) {
	if len(s.queue) > 0 {
		ev := s.queue[0]
		s.queue = s.queue[1:]
		return ev, nil
	}
	for {
		ev, err := s.ServerStreamingClient.Recv()
		if err != nil {
			s.release()
			return nil, err
		}
		switch e := ev.Event.(type) {
		case *pbresource.WatchEvent_Upsert_:
			res := e.Upsert.GetResource()
			if res.GetId().GetType().GetGroupVersion() != s.gv {
				continue
			}
			if !s.done {
				s.snapshot = append(s.snapshot, res)
			}
			return upsertEvent(res), nil
		case *pbresource.WatchEvent_Delete_:
			res := e.Delete.GetResource()
			if res.GetId().GetType().GetGroupVersion() != s.gv {
				continue
			}
			return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Delete_{Delete: &pbresource.WatchEvent_Delete{Resource: hide(res)}}}, nil
		case *pbresource.WatchEvent_EndOfSnapshot_:
			if s.done {
				continue
			}
			s.done = true
			s.c.mu.Lock()
			s.c.views[s.key] = &watchView{at: time.Now(), version: e.EndOfSnapshot.GetVersion(), resources: s.snapshot}
			s.c.mu.Unlock()
			s.snapshot = nil
			return endOfSnapshot(), nil
		case *pbresource.WatchEvent_NewSnapshot_:
			// The view is older than the server's log: Consul would have
			// expired it; end the stream so the client watches again.
			s.release()
			return nil, status.Error(codes.Unavailable, "resourcetest: stale view expired")
		default:
			// Bookmarks and anything else Consul does not send.
			continue
		}
	}
}

func upsertEvent(res *pbresource.Resource) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: hide(res)}}}
}

func endOfSnapshot() *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{}}}
}
