package history

import (
	"context"
	"errors"
	"maps"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// Restore brings a deleted resource back from the trash, or rolls a live
// one back to an earlier version (see pbhistoryv1.RestoreRequest).
func (s *Service) Restore(ctx context.Context, req *pbhistoryv1.RestoreRequest) (*pbhistoryv1.RestoreResponse, error) {
	const method = "Restore"
	r, err := s.begin(ctx, method, req.GetId())
	if err != nil {
		return nil, err
	}
	h, authz, reg, id := r.h, r.authz, r.reg, r.id
	rev, err := s.revisionToRestore(ctx, h, authz, reg, id, req.Version)
	if err != nil {
		return nil, s.srv.Fail(method, id, err)
	}
	stored, err := s.readStored(ctx, id)
	if err != nil {
		return nil, s.srv.Fail(method, id, err)
	}
	if req.WithOwned && !rev.Deleted {
		return nil, s.srv.Fail(method, id, status.Errorf(codes.InvalidArgument,
			"with_owned: only a deletion is restored with what it owned, and version %s is a write; give the deletion's version (or none)", rev.Version))
	}
	rsp := new(pbhistoryv1.RestoreResponse)
	if stored != nil && !rev.Deleted {
		rsp.Resource, err = s.rollBack(ctx, rev, stored, req.ExpectedVersion)
	} else {
		rsp.Resource, err = s.srv.Create(ctx, recreated(rev.Resource, rev.Resource.Owner))
		if err == nil && req.WithOwned {
			s.restoreOwned(ctx, h, authz, rev, rsp.Resource.Id, rsp)
		}
	}
	if err != nil {
		return nil, s.srv.Fail(method, id, err)
	}
	return rsp, nil
}

// revisionToRestore reads the revision of id at version, or, when version
// is empty, finds the newest deletion of id's name (of the lifetime id.Uid
// names, when set).
func (s *Service) revisionToRestore(ctx context.Context, h storage.Historian, authz resource.Authorizer, reg resource.Registered, id *pbresource.ID, version string) (storage.Revision, error) {
	if version != "" {
		if err := checkVersion("version", version); err != nil {
			return storage.Revision{}, err
		}
		return s.readRevision(ctx, h, authz, reg, id, version)
	}
	if err := server.ACLStatus(reg.AuthorizeRead(authz, id, nil)); err != nil {
		return storage.Revision{}, err
	}
	preq := storage.RevisionPageRequest{Limit: DefaultPageSize}
	for {
		page, err := h.ListRevisions(ctx, id, preq)
		if err != nil {
			return storage.Revision{}, server.StorageStatus(err)
		}
		for _, rev := range page.Revisions {
			if rev.Deleted && (id.Uid == "" || rev.Resource.Id.Uid == id.Uid) {
				return rev, server.ACLStatus(s.authorizeRevision(authz, reg, rev))
			}
		}
		if page.Next == "" {
			return storage.Revision{}, status.Errorf(codes.NotFound,
				"no deletion of %s is kept in the trash; give the version to restore", resource.IDString(id))
		}
		preq.Before = page.Next
	}
}

// readStored returns what is stored under id's name, in whatever
// GroupVersion and with whatever Uid; nil when nothing is.
func (s *Service) readStored(ctx context.Context, id *pbresource.ID) (*pbresource.Resource, error) {
	name := &pbresource.ID{Type: id.Type, Tenancy: id.Tenancy, Name: id.Name}
	res, err := s.srv.Backend().Read(ctx, storage.StrongConsistency, name)
	var gv storage.GroupVersionMismatchError
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, storage.ErrNotFound):
		return nil, nil
	case errors.As(err, &gv):
		return gv.Stored, nil
	}
	var gvp *storage.GroupVersionMismatchError
	if errors.As(err, &gvp) && gvp != nil {
		return gvp.Stored, nil
	}
	return nil, server.StorageStatus(err)
}

// recreated is what restoring src as a new lifetime owned by owner writes:
// its data and metadata, without Uid, version, status, or deletion mark.
func recreated(src *pbresource.Resource, owner *pbresource.ID) *pbresource.Resource {
	return &pbresource.Resource{
		Id:       &pbresource.ID{Type: src.Id.Type, Tenancy: src.Id.Tenancy, Name: src.Id.Name},
		Owner:    owner,
		Metadata: unmarked(src.Metadata),
		Data:     src.Data,
	}
}

// unmarked returns meta without the deletion mark; meta itself when it has
// none (it is never changed).
func unmarked(meta map[string]string) map[string]string {
	if _, ok := meta[resource.DeletionTimestampKey]; !ok {
		return meta
	}
	meta = maps.Clone(meta)
	delete(meta, resource.DeletionTimestampKey)
	return meta
}

// rollBack writes stored's data and metadata back to rev's, with a
// compare-and-swap on expected (stored's version when empty).
func (s *Service) rollBack(ctx context.Context, rev storage.Revision, stored *pbresource.Resource, expected string) (*pbresource.Resource, error) {
	if resource.IsMarkedForDeletion(stored) {
		return nil, status.Errorf(codes.FailedPrecondition,
			"resource %s is marked for deletion and cannot be rolled back; restore it once it is deleted", resource.IDString(stored.Id))
	}
	if expected == "" {
		expected = stored.Version
	}
	src := rev.Resource
	id := &pbresource.ID{Type: src.Id.Type, Tenancy: src.Id.Tenancy, Name: src.Id.Name, Uid: stored.Id.Uid}
	rsp, err := s.srv.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id:       id,
		Owner:    stored.Owner,
		Version:  expected,
		Metadata: unmarked(src.Metadata),
		Data:     src.Data,
	}})
	if err != nil {
		return nil, err
	}
	return rsp.Resource, nil
}

// restoreOwned restores what the deletion of owner (rev) cascaded to, owned
// by restored (the owner's new ID; nil when the owner could not be
// restored), recursively, and adds each to rsp: in rsp.Owned, owners first,
// or in rsp.NotRestored with the reason.
func (s *Service) restoreOwned(ctx context.Context, h storage.Historian, authz resource.Authorizer, owner storage.Revision, restored *pbresource.ID, rsp *pbhistoryv1.RestoreResponse) {
	owned, err := cascaded(ctx, h, owner)
	if err != nil {
		rsp.NotRestored = append(rsp.NotRestored, notRestored(owner, server.StorageStatus(err), "listing what it owned: "))
		return
	}
	for _, rev := range owned {
		var res *pbresource.Resource
		err := s.authorizeRevision(authz, resource.Registered{Type: rev.Resource.Id.Type}, rev)
		switch {
		case err != nil:
			err = server.ACLStatus(err)
		case restored == nil:
			err = status.Errorf(codes.FailedPrecondition, "its owner %s could not be restored", resource.ReferenceString(owner.Resource.Id))
		default:
			res, err = s.srv.Create(ctx, recreated(rev.Resource, restored))
		}
		var next *pbresource.ID
		if err != nil {
			rsp.NotRestored = append(rsp.NotRestored, notRestored(rev, err, ""))
		} else {
			next = res.Id
			rsp.Owned = append(rsp.Owned, &pbhistoryv1.Restored{
				Id: res.Id, Version: res.Version, FromVersion: rev.Version, PreviousUid: rev.Resource.Id.Uid,
			})
		}
		s.restoreOwned(ctx, h, authz, rev, next, rsp)
	}
}

// cascaded returns the deletions of what owner's lifetime owned that are
// not older than owner's deletion, the newest of each name only.
func cascaded(ctx context.Context, h storage.Historian, owner storage.Revision) ([]storage.Revision, error) {
	var (
		out  []storage.Revision
		seen = make(map[string]bool)
		preq = storage.RevisionPageRequest{Limit: DefaultPageSize}
	)
	for {
		page, err := h.ListTrashOwnedBy(ctx, owner.Resource.Id, preq)
		if err != nil {
			return nil, err
		}
		for _, rev := range page.Revisions {
			key := resource.ReferenceString(rev.Resource.Id)
			if !rev.Deleted || versionLess(rev.Version, owner.Version) || seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, rev)
		}
		if page.Next == "" {
			return out, nil
		}
		preq.Before = page.Next
	}
}

// versionLess reports whether store version a is older than b: versions
// are decimal numbers (compared as strings when they are not).
func versionLess(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return len(a) < len(b) || (len(a) == len(b) && a < b)
	}
	return x < y
}

// notRestored reports rev as not restored because of err.
func notRestored(rev storage.Revision, err error, prefix string) *pbhistoryv1.NotRestored {
	st := status.Convert(err)
	return &pbhistoryv1.NotRestored{
		Id:          rev.Resource.Id,
		FromVersion: rev.Version,
		Code:        st.Code().String(),
		Reason:      prefix + st.Message(),
	}
}
