package controller

import (
	"context"
	"strconv"
	"sync"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// confirm replaces a snapshot that came without a version, from a server
// that is not Loom, with a consistent List of typ's GroupVersion. Such a
// server (Consul) may serve a snapshot up to 10 s stale while another
// watch of the type is open: taken as it is, it would leave resources out
// of a freshly primed cache and, on a re-watch, report live resources as
// deleted. The List is at least as new as the snapshot, so the cache is
// replaced with it instead; the stream's changes that follow may replay
// states the List already holds, so floor, the newest version it holds,
// is returned: a later Upsert at or before floor is not applied (see
// upsert). Cost: one List of the type per snapshot, i.e. twice the bytes
// of priming, against such servers only. Loom's snapshots carry the
// version they are consistent at and are never confirmed.
//
// Resources the List returns at the snapshot's version are taken from the
// snapshot (decoded compactly from the stream). A server without List
// (Unimplemented) cannot be confirmed against: its snapshot is taken as it
// is. The List asks for pages of confirmPageSize, so a server that pages
// (all pages consistent at one version) keeps each reply well under the
// message size limit; Consul ignores page_size and sends everything.
func (w *cacheWatcher) confirm(ctx context.Context, typ *pbresource.Type, snapshot []*pbresource.Resource) ([]*pbresource.Resource, uint64, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
	req := &pbresource.ListRequest{
		Type:          typ,
		Tenancy:       &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard},
		PageSize:      confirmPageSize,
		LabelSelector: w.Selector.String(),
	}
	var listed []*pbresource.Resource
	for {
		rsp, err := w.Client.List(ctx, req)
		if status.Code(err) == codes.Unimplemented {
			return snapshot, 0, nil
		}
		if err != nil {
			// Aborted between pages (writes outran the server's
			// history) too: the watch is opened again, and confirms
			// again.
			return nil, 0, err
		}
		// Consul ignores label_selector: keep only what matches.
		for _, res := range rsp.Resources {
			if w.Selector.Matches(res.Metadata) {
				listed = append(listed, res)
			}
		}
		if rsp.NextPageToken == "" {
			break
		}
		req.PageToken = rsp.NextPageToken
	}
	streamed := make(map[string]*pbresource.Resource, len(snapshot))
	for _, res := range snapshot {
		streamed[resource.IDString(res.Id)] = res
	}
	var floor uint64
	for i, res := range listed {
		if s := streamed[resource.IDString(res.Id)]; s != nil && s.Version == res.Version && s.Id.Uid == res.Id.Uid {
			listed[i] = s
		}
		if n, err := strconv.ParseUint(res.GetVersion(), 10, 64); err == nil && n > floor {
			floor = n
		}
	}
	return listed, floor, nil
}

// confirmPageSize is the page size of confirm's List: a reply of 1,000
// resources of up to 4 KB each stays under gRPC's 4 MB default limit.
const confirmPageSize = 1000

// upsert applies a change from the stream. From a server whose snapshots
// are confirmed (unversioned), a change at or before floor is already in
// the cache or superseded (the List that set floor was consistent and
// versions grow store-wide), and a change older than the cached state of
// the same resource (another GroupVersion's stream had a newer one) is
// not applied either. It reports whether res was applied.
func (w *cacheWatcher) upsert(res *pbresource.Resource, unversioned bool, floor uint64) (*pbresource.Resource, bool, error) {
	if !unversioned {
		old, err := w.Cache.Upsert(res)
		return old, err == nil, err
	}
	if n, err := strconv.ParseUint(res.GetVersion(), 10, 64); err == nil && n <= floor {
		return nil, false, nil
	}
	return w.Cache.UpsertNewer(res)
}

// unselect applies a change from the stream to a resource that does not
// match the watcher's selector: the cache no longer holds it. It returns
// what the cache held, nil if nothing was removed. With a server whose
// snapshots are confirmed (unversioned), a change at or before floor, or
// older than the cached state of the same resource, is a replay and
// removes nothing (as in upsert).
func (w *cacheWatcher) unselect(res *pbresource.Resource, unversioned bool, floor uint64) (*pbresource.Resource, error) {
	if !unversioned {
		return w.Cache.Delete(res.Id)
	}
	if n, err := strconv.ParseUint(res.GetVersion(), 10, 64); err == nil && n <= floor {
		return nil, nil
	}
	return w.Cache.DeleteOlder(res)
}

// serverProbe learns from the first snapshot any of a Manager's watches
// gets whether the server versions its snapshots, as Loom does (its
// WatchList and List return every GroupVersion of a type), or not, as
// Consul does (they keep only the requested GroupVersion, and snapshots
// may be stale).
type serverProbe struct {
	once      sync.Once
	known     chan struct{}
	versioned bool
}

func newServerProbe() *serverProbe { return &serverProbe{known: make(chan struct{})} }

// learn records what a snapshot showed; only the first call counts.
func (p *serverProbe) learn(versioned bool) {
	if p == nil {
		return
	}
	p.once.Do(func() {
		p.versioned = versioned
		close(p.known)
	})
}

// unversioned reports whether the server is known not to version its
// snapshots.
func (p *serverProbe) unversioned() bool {
	if p == nil {
		return false
	}
	select {
	case <-p.known:
		return !p.versioned
	default:
		return false
	}
}

// wait blocks until the server is known and reports whether it versions
// its snapshots; false if ctx ended first.
func (p *serverProbe) wait(ctx context.Context) (versioned, ok bool) {
	select {
	case <-p.known:
		return p.versioned, true
	case <-ctx.Done():
		return false, false
	}
}
