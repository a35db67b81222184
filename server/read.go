package server

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// Read returns one resource. It is eventually consistent unless the caller
// sets the x-consul-consistency-mode metadata to "consistent". The response
// holds the backend's shared message: gRPC only marshals it and the
// in-process client clones it.
func (s *Server) Read(ctx context.Context, req *pbresource.ReadRequest) (*pbresource.ReadResponse, error) {
	authz, err := s.authorizer(ctx)
	if err != nil {
		return nil, s.fail("Read", req.GetId(), err)
	}
	reg, id, err := s.checkID("id", req.GetId())
	if err != nil {
		return nil, s.fail("Read", req.GetId(), err)
	}
	res, err := s.backend.Read(ctx, readConsistency(ctx), id)
	if err != nil {
		return nil, s.fail("Read", id, s.readError(authz, reg, id, err))
	}
	if err := aclError(reg.AuthorizeRead(authz, id, res)); err != nil {
		return nil, s.fail("Read", id, err)
	}
	return &pbresource.ReadResponse{Resource: res}, nil
}

// readError maps a failed backend Read, checking the caller's right to read
// first so that errors reveal nothing to a caller who may not read id.
func (s *Server) readError(authz resource.Authorizer, reg resource.Registered, id *pbresource.ID, err error) error {
	if errors.Is(err, storage.ErrNotFound) {
		if err := aclError(reg.AuthorizeRead(authz, id, nil)); err != nil {
			return err
		}
		return status.Errorf(codes.NotFound, "resource %s does not exist", resource.IDString(id))
	}
	if stored := mismatchedStored(err); stored != nil {
		if err := s.authorizeReadStored(authz, reg, id, stored); err != nil {
			return err
		}
		return status.Errorf(codes.InvalidArgument,
			"resource %s is stored with GroupVersion %q, not the requested %q; read it with that type",
			resource.ReferenceString(id), stored.Id.Type.GetGroupVersion(), id.Type.GroupVersion)
	}
	return storageError(err)
}
