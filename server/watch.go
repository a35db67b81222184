package server

import (
	"context"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
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
// snapshot as the truth. Sending never blocks writers: the backend buffers
// each watch separately, within bounds. After Shutdown, the stream ends with
// ErrShuttingDown.
func (s *Server) WatchList(req *pbresource.WatchListRequest, stream grpc.ServerStreamingServer[pbresource.WatchEvent]) error {
	streamCtx := stream.Context()
	if s.shuttingDown.Err() != nil {
		return s.fail("WatchList", nil, ErrShuttingDown)
	}
	// ctx ends with the stream or at Shutdown.
	ctx, cancel := context.WithCancel(streamCtx)
	defer cancel()
	defer context.AfterFunc(s.shuttingDown, cancel)()
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
	w, err := s.backend.WatchList(ctx, storage.UnversionedTypeFrom(req.Type), tenancy, req.NamePrefix)
	if err != nil {
		return s.fail("WatchList", nil, storageError(err))
	}
	defer w.Close()

	// After the snapshot, the backend's events may be shared with other
	// watches; over gRPC, the codec of ServerOptions then marshals each
	// once for all streams (see watch_encode.go).
	mark, deltas := s.marksEvents(stream), false
	for {
		ev, err := w.Next(ctx)
		if err == nil {
			// Whatever a backend does with buffered events once ctx has
			// ended, send none after that. (ctx is a cancelCtx: Err is an
			// atomic load, no lock.)
			err = ctx.Err()
		}
		if err != nil {
			if ctx.Err() != nil {
				if streamErr := streamCtx.Err(); streamErr != nil {
					return status.FromContextError(streamErr).Err()
				}
				return s.fail("WatchList", nil, ErrShuttingDown)
			}
			return s.fail("WatchList", nil, storageError(err))
		}
		if res := eventResource(ev); res != nil {
			if err := s.registrationOf(reg, res).AuthorizeRead(authz, res.Id, res); err != nil {
				if isDenied(err) {
					continue
				}
				return s.fail("WatchList", res.Id, aclError(err))
			}
		}
		if ev.GetEndOfSnapshot() != nil {
			deltas = true
		} else if mark && deltas {
			s.encoded.mark(ev)
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
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
