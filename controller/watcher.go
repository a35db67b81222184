package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/internal/pbdecode"
	"github.com/loomrt/loom/internal/retry"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// cacheWatcher keeps the Manager's cache in step with a ResourceService: one WatchList
// stream per type, re-opened whenever it breaks.
type cacheWatcher struct {
	// Client is the ResourceService to watch.
	Client pbresource.ResourceServiceClient
	// Cache receives the resources.
	Cache *cache.Cache
	// Selector selects the resources the cache holds (the zero Selector:
	// all). It is sent to the server and applied again to what comes
	// back, since Consul's server ignores it.
	Selector selector.Selector
	// Logger, if set, logs stream breaks.
	Logger hclog.Logger
	// Probe, if set, is told by the first snapshot whether the server
	// versions its snapshots (Loom) or not (Consul); the Manager's
	// watchers share it.
	Probe *serverProbe
	// Health is told how each attempt fares; it counts and logs failures.
	Health *watchHealth
	// RetryMin and RetryMax bound the backoff between attempts to re-open a
	// broken stream (defaults 10 ms and 5 s). A stream that was healthy is
	// re-opened after a random pause below RetryMin.
	RetryMin, RetryMax time.Duration
}

// Run watches typ until ctx ends. Before the first EndOfSnapshot it only
// collects; at each EndOfSnapshot it replaces the type's content with the
// snapshot (calling sink for what changed) and, the first time, calls
// primed. Afterwards every change is applied to the cache and then passed
// to sink, in stream order, from this goroutine. The type must have been
// added to the cache. Run returns nil when ctx ends.
//
// A broken stream is re-opened from the last version the cache has seen
// (WatchListRequest.since_version, with bookmarks so that a quiet type's
// resume point advances too): a server that still has every change since
// then sends only those, and the cache is current again without a new
// snapshot. Otherwise the server says so (a NewSnapshot event) and sends
// a snapshot, which replaces the type's content as at the start. A server
// that ignores since_version (Consul) sends a snapshot without warning;
// its first resource older than the resume point, or its EndOfSnapshot,
// gives it away, and it is handled as a snapshot too.
//
// A snapshot without a version (Consul) may be stale: it is confirmed with
// a consistent List, and the stream's changes that replay older states are
// not applied (see confirm). Such a server keeps only typ's GroupVersion,
// so its snapshot replaces only that GroupVersion in the cache.
//
// With a Selector, the cache holds only the matching resources: a
// snapshot keeps those, and a change to a resource that does not match is
// its deletion for the cache and sink (dropped if the cache does not hold
// it), as Loom's server sends it for a resource that leaves the selection.
func (w *cacheWatcher) Run(ctx context.Context, typ *pbresource.Type, sink func(cache.Event), primed func()) error {
	if !w.Cache.HasType(typ) {
		return fmt.Errorf("type %s was not added to the cache", resource.TypeString(typ))
	}
	logger := w.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	logger = logger.With("type", resource.TypeString(typ))
	// Jitter: after a server restart every client re-opens its streams at
	// once; spreading them out spares the server.
	retryMin, retryMax := orDefault(w.RetryMin, 10*time.Millisecond), orDefault(w.RetryMax, 5*time.Second)
	bo := retry.NewBackOff(retryMin, retryMax,
		backoff.WithRandomizationFactor(backoff.DefaultRandomizationFactor))
	accepted := func() { w.Health.accepted(typ, logger) }
	var once sync.Once
	markPrimed := func() {
		if primed != nil {
			once.Do(primed)
		}
	}
	var resume resumePoint
	for {
		opened := time.Now()
		current, err := w.watchOnce(ctx, typ, &resume, sink, markPrimed, accepted)
		if ctx.Err() != nil {
			return nil
		}
		// A stream that lasted longer than the longest backoff was healthy
		// too, even if it brought nothing (a resumed stream of a quiet type
		// on a server without bookmarks).
		current = current || time.Since(opened) > retryMax
		var wait time.Duration
		if current {
			// The stream was healthy: re-open it soon (it resumes), after
			// a random pause below RetryMin that still spreads the clients
			// of a restarted server. Failures after that back off.
			bo.Reset()
			wait = rand.N(retryMin)
		} else {
			wait = bo.NextBackOff()
		}
		if resume.refused(err) {
			// The server does not know the resume point (it restarted with
			// an empty store, say): start afresh, at once.
			logger.Debug("cannot resume the watch; watching afresh", "error", err, "since_version", resume.version)
			resume = resumePoint{}
			continue
		}
		// A refusal that retrying will not cure until someone fixes the
		// setup (gives the Manager a token, registers the type on the
		// server) is logged loudly, once per change of it.
		w.Health.failed(typ, err, wait, logger)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// watchOnce runs one stream to its end, resuming from resume if it is
// set and keeping it up to date, and calls accepted on its first event
// (the server accepted the watch). It reports whether the cache was current
// at some point of the stream (it got as far as its EndOfSnapshot, or
// resumed).
func (w *cacheWatcher) watchOnce(ctx context.Context, typ *pbresource.Type, resume *resumePoint, sink func(cache.Event), primed, accepted func()) (bool, error) {
	progress, err := w.Cache.Applied(typ)
	if err != nil {
		return false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Events are immutable (see the resource package doc): the cache keeps
	// what it receives without changing it and clones on read. So a remote
	// stream's events can be decoded compactly, each resource in one block
	// that shares its Type and Tenancy with the stream's others
	// (internal/pbdecode); the in-process client ignores call options.
	// Over gRPC, a Loom server sends what it has at hand in batches
	// (batch_events), which Unbatched hands out one by one; in process, and
	// from Consul, every message is one event anyway.
	stream, err := w.Client.WatchList(ctx, &pbresource.WatchListRequest{
		Type:          typ,
		Tenancy:       &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard},
		SinceVersion:  resume.version,
		Bookmarks:     true,
		BatchEvents:   true,
		LabelSelector: w.Selector.String(),
	}, grpc.ForceCodecV2(pbdecode.NewCodec()))
	if err != nil {
		return false, err
	}
	stream = pbresource.Unbatched(stream)
	st := newStreamState(w, typ, resume, progress, sink, primed)
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = status.Error(codes.Unavailable, "watch stream closed by the server")
			}
			return st.current, err
		}
		if accepted != nil {
			accepted()
			accepted = nil
		}
		if err := st.apply(ctx, ev); err != nil {
			return true, err
		}
	}
}

// markApplied tells the cache that it holds the type's changes up to the
// resume point, for the reconciles that wait to read their own writes
// (cache.Applied). It comes before the change's sink, as soon as the cache
// holds the change: a key the change queues whose last reconcile wrote it
// then finds its gate open (see ownWrites), and goes to a worker at once.
func markApplied(progress *cache.Applied, p *resumePoint) {
	if p.n > 0 {
		progress.Mark(p.n)
	}
}

// appliedSince completes a snapshot that came unannounced on a stream
// that asked to resume from p: its resources with versions after p were
// applied to the cache as changes before it gave itself away, so they are
// in the cache with such versions and not in snapshot. Rare (a server
// that ignores since_version), so it reads the type's whole content.
func (w *cacheWatcher) appliedSince(typ *pbresource.Type, snapshot []*pbresource.Resource, p resumePoint) ([]*pbresource.Resource, error) {
	all, err := w.Cache.All(typ)
	if err != nil {
		return nil, err
	}
	in := make(map[string]bool, len(snapshot))
	for _, res := range snapshot {
		in[resource.IDString(res.Id)] = true
	}
	for _, res := range all {
		if p.precedes(res.Version) && !in[resource.IDString(res.Id)] {
			snapshot = append(snapshot, res)
		}
	}
	return snapshot, nil
}

// resumePoint is the store version a cache's watch of one type has seen
// everything up to, as a number; the zero value is none. Versions that are
// not numbers turn resuming off.
type resumePoint struct {
	version string // as the server gave it; "" for none
	n       uint64
	broken  bool // a version was not a number: never resume
}

// advance moves the point to v if v is after it.
func (p *resumePoint) advance(v string) {
	if v == "" || p.broken {
		return
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		*p = resumePoint{broken: true}
		return
	}
	if n > p.n || p.version == "" {
		p.version, p.n = v, n
	}
}

// precedes reports whether the point comes before the version v, i.e. v
// is a change a resumed stream may send. Versions that are not numbers
// are not.
func (p *resumePoint) precedes(v string) bool {
	n, err := strconv.ParseUint(v, 10, 64)
	return err == nil && n > p.n
}

// refused reports whether err is the server refusing to resume from the
// point: a since_version it does not accept.
func (p *resumePoint) refused(err error) bool {
	return p.version != "" && pbresource.SinceVersionRefused(err)
}

func dropID(list []*pbresource.Resource, id *pbresource.ID) []*pbresource.Resource {
	out := list[:0]
	for _, r := range list {
		if !resource.EqualReferenceOrID(r.Id, id) {
			out = append(out, r)
		}
	}
	return out
}
