package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// WriteStatus sets one status key of an existing resource, stamping its
// UpdatedAt with the current time. Id.Uid is required and must match. With
// Version set the write is a compare-and-swap; otherwise it is retried until
// it lands. It works on resources marked for deletion too, and on a resource
// stored under another GroupVersion than the request names (the status is
// written to the stored form).
func (s *Server) WriteStatus(ctx context.Context, req *pbresource.WriteStatusRequest) (*pbresource.WriteStatusResponse, error) {
	authz, err := s.authorizer(ctx)
	if err != nil {
		return nil, s.fail("WriteStatus", req.GetId(), err)
	}
	ctx, err = s.withFence(ctx, authz)
	if err != nil {
		return nil, s.fail("WriteStatus", req.GetId(), err)
	}
	ctx = withChange(ctx, authz)
	reg, id, err := s.checkID("id", req.GetId())
	if err != nil {
		return nil, s.fail("WriteStatus", req.GetId(), err)
	}
	if id.Uid == "" {
		return nil, s.fail("WriteStatus", id, invalidArgument(resource.ErrInvalidField{Name: "id.uid", Wrapped: resource.ErrMissing}))
	}
	if err := checkStatusKey(req.Key); err != nil {
		return nil, s.fail("WriteStatus", id, err)
	}
	if err := checkStatus(req.Status); err != nil {
		return nil, s.fail("WriteStatus", id, err)
	}
	// The request is never changed nor kept: the stamped status is the
	// server's own copy, which a storage.StatusWriter stores as it is.
	st := resource.CloneStatusAt(req.Status, time.Now())

	var out *pbresource.Resource
	err = s.readModifyWrite(ctx, id, storage.EventualConsistency, func(stored *pbresource.Resource, consistency storage.ReadConsistency) (err error) {
		out, err = s.writeStatusOnce(ctx, authz, reg, id, req, st, stored, consistency)
		return err
	})
	if err != nil {
		return nil, s.fail("WriteStatus", id, err)
	}
	return &pbresource.WriteStatusResponse{Resource: out}, nil
}

// writeStatusOnce writes st, the server's own stamped copy of req.Status,
// under req.Key of the resource id (normalized), with stored what is stored
// under its name. It never changes st.
func (s *Server) writeStatusOnce(ctx context.Context, authz resource.Authorizer, reg resource.Registered, id *pbresource.ID,
	req *pbresource.WriteStatusRequest, st *pbresource.Status, stored *pbresource.Resource, consistency storage.ReadConsistency,
) (*pbresource.Resource, error) {
	cas := req.Version != ""
	if stored == nil {
		// Only a caller allowed to write it may learn that it is gone.
		if err := aclError(reg.AuthorizeWrite(authz, &pbresource.Resource{Id: id}, nil)); err != nil {
			return nil, refuse(consistency, err)
		}
		return nil, refuse(consistency, status.Errorf(codes.NotFound, "resource %s does not exist", resource.IDString(id)))
	}
	// Authorized before anything about stored is told: its Uid, its
	// version.
	if err := s.authorizeWriteStored(authz, reg, id, stored); err != nil {
		return nil, err
	}
	if stored.Id.Uid != id.Uid {
		return nil, refuse(consistency, status.Errorf(codes.FailedPrecondition,
			"id.uid %s does not match the stored resource's uid %s: the resource was deleted and created again",
			id.Uid, stored.Id.Uid))
	}
	if cas && req.Version != stored.Version {
		return nil, refuse(consistency, versionMismatch(req.Version, stored))
	}
	if err := s.limits.checkStatusKeys(stored, req.Key); err != nil {
		return nil, err
	}
	if err := s.limits.checkStatusSize(stored, req.Key, st); err != nil {
		return nil, err
	}
	var out *pbresource.Resource
	var err error
	if sw, ok := s.backend.(storage.StatusWriter); ok {
		out, err = sw.WriteStatusCAS(ctx, stored, req.Key, st)
	} else {
		out, err = s.backend.WriteCAS(ctx, storage.WithStatus(stored, req.Key, st))
	}
	if errors.Is(err, storage.ErrTooLarge) {
		return nil, writeError(cas, storage.WithStatus(stored, req.Key, st), "status", err)
	}
	if err != nil {
		return nil, casError(cas, err)
	}
	return out, nil
}
