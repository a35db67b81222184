package server

import (
	"context"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// List returns the resources of a type stored under the requested
// GroupVersion, in a tenancy ("*" matches every unit; empty units mean
// "default"), whose names start with a prefix. Resources the caller may not
// read are left out. Results are eventually consistent.
func (s *Server) List(ctx context.Context, req *pbresource.ListRequest) (*pbresource.ListResponse, error) {
	authz, err := s.authorizer(ctx)
	if err != nil {
		return nil, s.fail("List", nil, err)
	}
	reg, err := s.resolveType("type", req.GetType())
	if err != nil {
		return nil, s.fail("List", nil, err)
	}
	tenancy, err := resource.NormalizeTenancy("tenancy", reg.Scope, req.Tenancy, true)
	if err != nil {
		return nil, s.fail("List", nil, invalidArgument(err))
	}
	if err := aclError(reg.AuthorizeList(authz, tenancy)); err != nil {
		return nil, s.fail("List", nil, err)
	}
	items, err := s.backend.List(ctx, storage.EventualConsistency, storage.UnversionedTypeFrom(req.Type), tenancy, req.NamePrefix)
	if err != nil {
		return nil, s.fail("List", nil, storageError(err))
	}
	out := make([]*pbresource.Resource, 0, len(items))
	for _, item := range items {
		if item.Id.Type.GetGroupVersion() != req.Type.GroupVersion {
			continue
		}
		if err := reg.AuthorizeRead(authz, item.Id, item); err != nil {
			if isDenied(err) {
				continue
			}
			return nil, s.fail("List", item.Id, aclError(err))
		}
		out = append(out, item)
	}
	return &pbresource.ListResponse{Resources: out}, nil
}

// ListByOwner returns the resources owned by the owner (which must be given
// with its Uid), leaving out those the caller may not read. Results are
// eventually consistent.
func (s *Server) ListByOwner(ctx context.Context, req *pbresource.ListByOwnerRequest) (*pbresource.ListByOwnerResponse, error) {
	authz, err := s.authorizer(ctx)
	if err != nil {
		return nil, s.fail("ListByOwner", req.GetOwner(), err)
	}
	_, owner, err := s.checkID("owner", req.GetOwner())
	if err != nil {
		return nil, s.fail("ListByOwner", req.GetOwner(), err)
	}
	if owner.Uid == "" {
		return nil, s.fail("ListByOwner", owner, invalidArgument(resource.ErrInvalidField{Name: "owner.uid", Wrapped: resource.ErrMissing}))
	}
	ids, err := s.backend.OwnerReferences(ctx, owner)
	if err != nil {
		return nil, s.fail("ListByOwner", owner, storageError(err))
	}
	out := make([]*pbresource.Resource, 0, len(ids))
	for _, id := range ids {
		child, err := s.readStored(ctx, storage.EventualConsistency, id)
		if err != nil {
			return nil, s.fail("ListByOwner", owner, storageError(err))
		}
		// Skip what vanished or changed hands since the index was read.
		if child == nil || child.Owner.GetUid() != owner.Uid || (id.Uid != "" && child.Id.Uid != id.Uid) {
			continue
		}
		reg, _ := s.registry.Resolve(child.Id.Type)
		if err := reg.AuthorizeRead(authz, child.Id, child); err != nil {
			if isDenied(err) {
				continue
			}
			return nil, s.fail("ListByOwner", child.Id, aclError(err))
		}
		out = append(out, child)
	}
	return &pbresource.ListByOwnerResponse{Resources: out}, nil
}
