package server

import (
	"context"
	"maps"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// Delete removes a resource. It is idempotent: deleting what does not exist
// succeeds. A resource with finalizers is not removed but marked (its
// deletionTimestamp metadata is set); it goes once its last finalizer is
// removed by a Write. A resource that owns others leaves a Tombstone behind
// for the reaper.
func (s *Server) Delete(ctx context.Context, req *pbresource.DeleteRequest) (*pbresource.DeleteResponse, error) {
	authz, err := s.authorizer(ctx)
	if err != nil {
		return nil, s.fail("Delete", req.GetId(), err)
	}
	ctx, err = s.withFence(ctx, authz)
	if err != nil {
		return nil, s.fail("Delete", req.GetId(), err)
	}
	ctx = withChange(ctx, authz)
	reg, id, err := s.checkID("id", req.GetId())
	if err != nil {
		return nil, s.fail("Delete", req.GetId(), err)
	}
	// Deletes read strongly: a stale "not found" would report success
	// without deleting anything.
	err = s.readModifyWrite(ctx, id, storage.StrongConsistency, func(stored *pbresource.Resource, _ storage.ReadConsistency) error {
		return s.deleteOnce(ctx, authz, reg, id, req.Version, stored)
	})
	if err != nil {
		return nil, s.fail("Delete", id, err)
	}
	return &pbresource.DeleteResponse{}, nil
}

// deleteOnce deletes id (normalized) at version, if given, with stored
// what is stored under its name.
func (s *Server) deleteOnce(ctx context.Context, authz resource.Authorizer, reg resource.Registered, id *pbresource.ID, version string, stored *pbresource.Resource) error {
	if stored == nil {
		// Nothing to do, but only a caller allowed to delete it may learn
		// that.
		return aclError(reg.AuthorizeWrite(authz, &pbresource.Resource{Id: id}, nil))
	}
	// Authorized before anything about stored is told: its Uid, its
	// version.
	if err := s.authorizeWriteStored(authz, reg, id, stored); err != nil {
		return err
	}
	if id.Uid != "" && id.Uid != stored.Id.Uid {
		return status.Errorf(codes.FailedPrecondition,
			"id.uid %s does not match the stored resource's uid %s: the resource was deleted and created again",
			id.Uid, stored.Id.Uid)
	}
	cas := version != ""
	if cas && version != stored.Version {
		return status.Errorf(codes.Aborted,
			"version %s does not match the stored version %q: the resource changed since it was read",
			resource.Quote(version), stored.Version)
	}
	if resource.HasFinalizers(stored) {
		if resource.IsMarkedForDeletion(stored) {
			return nil // already waiting for its finalizers
		}
		meta := maps.Clone(stored.Metadata)
		meta[resource.DeletionTimestampKey] = time.Now().UTC().Format(time.RFC3339)
		marked := &pbresource.Resource{
			Id:         stored.Id,
			Owner:      stored.Owner,
			Version:    stored.Version,
			Generation: resource.NewULID(),
			Metadata:   meta,
			Status:     stored.Status,
			Data:       stored.Data,
		}
		if err := s.limits.checkSize(marked, stored, "metadata"); err != nil {
			return err
		}
		_, err := s.backend.WriteCAS(ctx, marked)
		return casError(cas, err)
	}
	return casError(cas, s.deleteStored(s.withCascade(ctx, stored), stored))
}

// deleteStored deletes stored (at its version). If it owns resources at
// that moment, the backend stores its Tombstone in the same atomic step
// (storage.WithTombstone), so the reaper finds every resource it owned:
// none can be created once it is gone (storage.ErrOwnerNotFound), and none
// created just before escapes the tombstone. opts add to the delete's
// options. It returns backend errors unmapped.
func (s *Server) deleteStored(ctx context.Context, stored *pbresource.Resource, opts ...storage.DeleteOption) error {
	return s.backend.DeleteCAS(ctx, stored.Id, stored.Version, append(opts, storage.WithTombstone(func() (*pbresource.Resource, error) {
		return newTombstone(stored.Id)
	}))...)
}

// registrationOf returns the registration for the GroupVersion res is
// stored in, falling back to reg (the requested type's) when that version is
// not registered.
func (s *Server) registrationOf(reg resource.Registered, res *pbresource.Resource) resource.Registered {
	t := res.GetId().GetType()
	if t.GetGroupVersion() == reg.Type.GetGroupVersion() {
		return reg
	}
	if r, ok := s.registry.Resolve(t); ok {
		return r
	}
	return reg
}
