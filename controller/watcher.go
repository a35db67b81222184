package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/internal/pbdecode"
	"github.com/loomrt/loom/internal/retry"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
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
	// Logger, if set, logs stream breaks.
	Logger hclog.Logger
	// RetryMin and RetryMax bound the backoff between attempts to re-open a
	// broken stream (defaults 10 ms and 5 s).
	RetryMin, RetryMax time.Duration
}

// Run watches typ until ctx ends. Before the first EndOfSnapshot it only
// collects; at each EndOfSnapshot it replaces the type's content with the
// snapshot (calling sink for what changed) and, the first time, calls
// primed. Afterwards every change is applied to the cache and then passed
// to sink, in stream order, from this goroutine. The type must have been
// added to the cache. Run returns nil when ctx ends.
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
	bo := retry.NewBackOff(orDefault(w.RetryMin, 10*time.Millisecond), orDefault(w.RetryMax, 5*time.Second),
		backoff.WithRandomizationFactor(backoff.DefaultRandomizationFactor))
	var once sync.Once
	markPrimed := func() {
		if primed != nil {
			once.Do(primed)
		}
	}
	for {
		gotSnapshot, err := w.watchOnce(ctx, typ, sink, markPrimed)
		if ctx.Err() != nil {
			return nil
		}
		if gotSnapshot {
			bo.Reset()
		}
		wait := bo.NextBackOff()
		if isSetupError(err) {
			// Retrying will not help until someone fixes the setup (e.g.
			// registers the type on the server, or gives the Manager a
			// token); say so loudly.
			logger.Error("cannot watch type; retrying", "error", err, "retry_in", wait)
		} else {
			logger.Debug("watch stream ended; re-opening", "error", err, "retry_in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// watchOnce runs one stream to its end. It reports whether the stream got
// as far as its EndOfSnapshot.
func (w *cacheWatcher) watchOnce(ctx context.Context, typ *pbresource.Type, sink func(cache.Event), primed func()) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Events are immutable (see the resource package doc): the cache keeps
	// what it receives without changing it and clones on read. So a remote
	// stream's events can be decoded compactly, each resource in one block
	// that shares its Type and Tenancy with the stream's others
	// (internal/pbdecode); the in-process client ignores call options.
	stream, err := w.Client.WatchList(ctx, &pbresource.WatchListRequest{
		Type:    typ,
		Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard},
	}, grpc.ForceCodecV2(pbdecode.NewCodec()))
	if err != nil {
		return false, err
	}
	var snapshot []*pbresource.Resource
	inSnapshot := true
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = status.Error(codes.Unavailable, "watch stream closed by the server")
			}
			return !inSnapshot, err
		}
		switch e := ev.Event.(type) {
		case *pbresource.WatchEvent_Upsert_:
			res := e.Upsert.GetResource()
			if res.GetId() == nil {
				continue
			}
			if inSnapshot {
				snapshot = append(snapshot, res)
				continue
			}
			old, err := w.Cache.Upsert(res)
			if err != nil {
				return true, err
			}
			sink(cache.Event{Kind: cache.Upserted, Resource: res, Old: old})
		case *pbresource.WatchEvent_Delete_:
			res := e.Delete.GetResource()
			if res.GetId() == nil {
				continue
			}
			if inSnapshot {
				// Not expected before EndOfSnapshot; drop it from the snapshot.
				snapshot = dropID(snapshot, res.Id)
				continue
			}
			old, err := w.Cache.Delete(res.Id)
			if err != nil {
				return true, err
			}
			if old != nil {
				sink(cache.Event{Kind: cache.Deleted, Resource: res, Old: old})
			}
		case *pbresource.WatchEvent_EndOfSnapshot_:
			if !inSnapshot {
				continue
			}
			inSnapshot = false
			events, err := w.Cache.Replace(typ, snapshot)
			snapshot = nil
			if err != nil {
				return true, err
			}
			for _, ev := range events {
				sink(ev)
			}
			primed()
		}
	}
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

// isSetupError reports whether a watch failed for a reason only a change of
// setup can cure: a bad request, a type the server does not know, or a
// caller without the right to watch. Consul answers a missing or unknown
// ACL token with Internal "ACL not found", so that counts too.
func isSetupError(err error) bool {
	switch st, _ := status.FromError(err); st.Code() {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented, codes.NotFound:
		return true
	case codes.Internal:
		return strings.Contains(st.Message(), "ACL not found")
	}
	return false
}
