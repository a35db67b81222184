package server

import (
	"context"
	"strconv"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
	"github.com/loomrt/loom/storage"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// WatchList streams the resources of a type's Group and Kind (whatever
// GroupVersion they are stored under) in a tenancy ("*" matches every unit)
// whose names start with a prefix: an Upsert for each that exists, one
// EndOfSnapshot, then an Upsert or Delete per change in commit order. Events
// about resources the caller may not read are skipped. A stream that cannot
// keep up ends with Aborted; the caller should watch again and treat the new
// snapshot as the truth. Sending never blocks writers. After Shutdown, the
// stream ends with ErrShuttingDown. When the ACLs change,
// ReauthorizeWatches ends the streams they no longer allow.
//
// With since_version, the stream resumes after that version: only the
// changes after it when the backend still has them (a
// storage.ResumableBackend), else NewSnapshot then the snapshot as above.
// With bookmarks, an idle stream gets a Bookmark every
// Config.WatchBookmarkInterval, when the backend can tell its position.
// A since_version that is not a number is InvalidArgument, one ahead of the
// store OutOfRange; nothing is sent then. With batch_events, a stream other
// than an in-process one sends the events it has at hand together, in Batch
// messages (watch_batch.go). With label_selector, the stream holds only
// the resources that match it: one that stops matching is sent as a Delete,
// one that starts matching as an Upsert (see selector.WatchFilter). See the proto's
// comments.
func (s *Server) WatchList(req *pbresource.WatchListRequest, stream grpc.ServerStreamingServer[pbresource.WatchEvent]) error {
	streamCtx := stream.Context()
	if s.shuttingDown.Err() != nil {
		return s.fail("WatchList", nil, ErrShuttingDown)
	}
	// ctx ends with the stream, at Shutdown, or when ReauthorizeWatches
	// ends the stream (its cause).
	ctx, cancel := context.WithCancelCause(streamCtx)
	defer cancel(nil)
	defer context.AfterFunc(s.shuttingDown, func() { cancel(nil) })()
	epoch := s.watchACLs.epoch.Load()
	authz, err := s.authorizer(ctx)
	if err != nil {
		return s.fail("WatchList", nil, err)
	}
	reg, err := s.resolveType("type", req.GetType())
	if err != nil {
		return s.fail("WatchList", nil, err)
	}
	tenancy, err := resource.NormalizeTenancy("tenancy", reg.Scope, req.Tenancy, true)
	if err != nil {
		return s.fail("WatchList", nil, invalidArgument(err))
	}
	if err := aclError(reg.AuthorizeList(authz, tenancy)); err != nil {
		return s.fail("WatchList", nil, err)
	}
	defer s.addWatch(&aclWatch{ctx: streamCtx, authz: authz, reg: reg, tenancy: tenancy, end: cancel}, epoch)()
	if v := req.SinceVersion; v != "" {
		if _, err := strconv.ParseUint(v, 10, 64); err != nil {
			return s.fail("WatchList", nil, invalidField("since_version", "%q is not a version (a decimal number)", resource.Truncate(v)))
		}
	}
	sel, err := parseSelector(req.LabelSelector)
	if err != nil {
		return s.fail("WatchList", nil, err)
	}
	src := &watchSource{s: s, ctx: ctx, streamCtx: streamCtx, authz: authz, reg: reg, tenancy: tenancy}
	w, resumed, err := s.openWatch(ctx, req, tenancy)
	if err != nil {
		return src.ended(ctx, err) // ctx may have ended already
	}
	defer w.Close()
	src.w, src.deltas = w, resumed
	if !sel.Empty() {
		src.selection = selector.NewWatchFilter(sel, req.SinceVersion != "")
	}
	if req.BatchEvents && !inProcess(stream) {
		return s.sendBatches(ctx, stream, src)
	}
	// After the snapshot (or from the start of a resumed stream), the
	// backend's events may be shared with other watches; over gRPC, the
	// codec of ServerOptions then marshals each once for all streams (see
	// watch_encode.go).
	mark := s.marksEvents(stream)
	for {
		ev, shared, err := src.next(ctx)
		if err != nil {
			return err
		}
		if mark && shared {
			s.encoded.mark(ev)
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

// watchSource yields the events one WatchList stream may send.
type watchSource struct {
	s              *Server
	ctx, streamCtx context.Context // WatchList's, and the stream's own
	w              storage.Watch
	authz          resource.Authorizer
	reg            resource.Registered
	tenancy        *pbresource.Tenancy // the watch's, normalized
	// deltas is set while the events are changes (after the snapshot, or
	// from the start of a resumed stream), which backends may share
	// between watches. Only next uses it.
	deltas bool
	// selection, when not nil, applies the stream's label selector.
	selection *selector.WatchFilter
}

// next returns the watch's next event the caller may read, waiting for it
// until ctx ends, and whether it is a change that other watches may share.
// Its error is the one WatchList returns.
func (src *watchSource) next(ctx context.Context) (ev *pbresource.WatchEvent, shared bool, err error) {
	for {
		ev, err := src.w.Next(ctx)
		if err == nil {
			// Whatever a backend does with buffered events once ctx has
			// ended, send none after that. (ctx is a cancelCtx: Err is an
			// atomic load, no lock.)
			err = ctx.Err()
		}
		if err != nil {
			return nil, false, src.ended(ctx, err)
		}
		if res := eventResource(ev); res != nil {
			if err := src.s.authorizeWatched(src.authz, src.reg, src.tenancy, res); err != nil {
				if isDenied(err) {
					continue
				}
				return nil, false, src.s.fail("WatchList", res.Id, aclError(err))
			}
		}
		shared := src.deltas
		if src.selection != nil {
			out, send := src.selection.Apply(ev)
			if !send {
				continue
			}
			shared = shared && out == ev
			ev = out
		}
		switch ev.Event.(type) {
		case *pbresource.WatchEvent_EndOfSnapshot_:
			src.deltas = true
		case *pbresource.WatchEvent_NewSnapshot_:
			src.deltas = false
		case *pbresource.WatchEvent_Upsert_, *pbresource.WatchEvent_Delete_:
			return ev, shared, nil
		}
		return ev, false, nil
	}
}

// ended turns the error of a Next with ctx into WatchList's. ctx is
// WatchList's or one derived from it.
func (src *watchSource) ended(ctx context.Context, err error) error {
	if ctx.Err() == nil {
		return src.s.fail("WatchList", nil, storageError(err))
	}
	if streamErr := src.streamCtx.Err(); streamErr != nil {
		return status.FromContextError(streamErr).Err()
	}
	if src.ctx.Err() == nil {
		// ctx was ended by the stream's own sender (see sendBatches),
		// which returns an error of its own.
		return err
	}
	if cause := context.Cause(src.ctx); cause != context.Canceled {
		return src.s.fail("WatchList", nil, cause) // from ReauthorizeWatches
	}
	return src.s.fail("WatchList", nil, ErrShuttingDown)
}

// eventResource returns the resource an Upsert or Delete event is about.
func eventResource(ev *pbresource.WatchEvent) *pbresource.Resource {
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		return e.Upsert.GetResource()
	case *pbresource.WatchEvent_Delete_:
		return e.Delete.GetResource()
	}
	return nil
}

// openWatch opens the backend's watch for req. resumed reports whether it
// may start with changes rather than a snapshot (a resume that can fall
// back to one starts with NewSnapshot). A backend that cannot resume gets a
// plain watch, which the stream starts with NewSnapshot when req asked to
// resume; it sends no bookmarks.
func (s *Server) openWatch(ctx context.Context, req *pbresource.WatchListRequest, tenancy *pbresource.Tenancy) (w storage.Watch, resumed bool, err error) {
	typ := storage.UnversionedTypeFrom(req.Type)
	if rb, ok := s.backend.(storage.ResumableBackend); ok {
		opts := storage.WatchOptions{SinceVersion: req.SinceVersion}
		if req.Bookmarks {
			opts.BookmarkInterval = s.bookmark
		}
		w, err := rb.WatchListSince(ctx, typ, tenancy, req.NamePrefix, opts)
		return w, err == nil && req.SinceVersion != "", err
	}
	w, err = s.backend.WatchList(ctx, typ, tenancy, req.NamePrefix)
	if err != nil || req.SinceVersion == "" {
		return w, false, err
	}
	return &prefixedWatch{first: newSnapshotEvent, Watch: w}, false, nil
}

// newSnapshotEvent is the first event of a stream that was asked to resume
// and cannot.
var newSnapshotEvent = &pbresource.WatchEvent{Event: &pbresource.WatchEvent_NewSnapshot_{
	NewSnapshot: &pbresource.WatchEvent_NewSnapshot{}}}

// prefixedWatch yields first, then the events of Watch. Like every event
// sent on a watch, first is shared and never changed.
type prefixedWatch struct {
	first *pbresource.WatchEvent
	sent  bool
	storage.Watch
}

func (p *prefixedWatch) Next(ctx context.Context) (*pbresource.WatchEvent, error) {
	if !p.sent {
		p.sent = true
		return p.first, nil
	}
	return p.Watch.Next(ctx)
}
