package upsert

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/loomrt/loom/internal/lifetime"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// CreateOrUpdateOwned is CreateOrUpdate for a resource owned by owner, as
// controller-runtime's CreateOrUpdate with SetControllerReference: it
// creates the resource with owner as its Owner, and updates it only while
// it is owner's. owner is the owner's ID with its Uid (the ID of the
// resource a reconciler got from the cache), which names one lifetime of
// it: a resource owned by an earlier owner of the same name is not owner's.
// mutate must leave the Owner alone.
//
// When the stored resource has another owner, none, or an earlier
// lifetime of owner's name, it returns an *AlreadyOwnedError and writes
// nothing: owners cannot change once set, so the resource cannot be
// adopted. A resource of an earlier lifetime is deleted by the reaper soon
// (its owner is gone); with ReplaceStale, CreateOrUpdateOwned deletes it
// itself and creates the new one at once, or returns ErrReplacePending
// while finalizers hold the old one.
//
// In a reconciler, watch the owned type with Controller.WithOwned (or
// dependency.MapOwnerFiltered): the owned resource's deletion then
// reconciles the owner's current lifetime, by name, which creates the new
// resource. So on ErrReplacePending, or an AlreadyOwnedError that is
// Stale, write a status that says so and return nil.
func CreateOrUpdateOwned(ctx context.Context, client pbresource.ResourceServiceClient, owner, id *pbresource.ID, mutate MutateFunc, opts ...Option) (*pbresource.Resource, Result, error) {
	if owner.GetType() == nil || owner.GetName() == "" || owner.GetUid() == "" {
		return nil, Unchanged, fmt.Errorf("upsert: CreateOrUpdateOwned needs the owner's ID with its type, name and Uid (the ID of the owner as read), got %s",
			resource.IDString(owner))
	}
	return run(ctx, round{client: client, id: id, owner: owner, mutate: mutate}, opts)
}

// ReplaceStale makes CreateOrUpdateOwned delete a stored resource owned by
// an earlier lifetime of the owner's name, instead of returning an
// *AlreadyOwnedError, and create the resource afresh once it is gone.
//
// The Delete is aimed at the old resource's Uid, so nothing newer is
// touched, and finding it gone already (the reaper got there first) is
// fine. A resource without finalizers is gone at once, and the new one is
// created in the same call (Created). One with finalizers is only marked
// for deletion: CreateOrUpdateOwned then returns an error matching
// ErrReplacePending and creates nothing. It does not wait for the
// finalizers: that can take as long as their controllers take, and would
// hold a worker meanwhile (or wait forever, if the caller's own controller
// is the one that must remove a finalizer). The old resource's deletion
// event brings the owner's reconciler back instead (see
// CreateOrUpdateOwned), and that call creates it.
//
// Resources with another owner, or none, are never deleted: they are
// someone else's. CreateOrUpdate ignores ReplaceStale.
func ReplaceStale() Option {
	return func(o *options) { o.replace = true }
}

// ErrReplacePending is matched (errors.Is) by the error CreateOrUpdateOwned
// with ReplaceStale returns when it has deleted a stale resource (owned by
// an earlier lifetime of the owner) that finalizers still hold: the new
// resource is created by a later call, once the old one is gone.
var ErrReplacePending = errors.New("upsert: a resource of an earlier owner is being deleted; create its replacement once it is gone")

// replacePendingError names the resource ErrReplacePending is about.
type replacePendingError struct{ stale *pbresource.Resource }

func (e *replacePendingError) Error() string {
	return fmt.Sprintf("upsert: %s, owned by %s, an earlier lifetime of its owner, is marked for deletion and its finalizers (%s) hold it; "+
		"its replacement is created once it is gone (watch its type with WithOwned so that its deletion reconciles the owner)",
		resource.IDString(e.stale.Id), resource.IDString(e.stale.Owner), strings.Join(resource.Finalizers(e.stale), ", "))
}

func (e *replacePendingError) Is(target error) bool { return target == ErrReplacePending }

// AlreadyOwnedError says that the resource CreateOrUpdateOwned was to
// write is stored with another owner than the one it was given, or with
// none; nothing was written. Use errors.As to get it.
type AlreadyOwnedError struct {
	// Resource is the stored resource's ID, with its Uid.
	Resource *pbresource.ID
	// Owner is the stored resource's owner, nil when it has none.
	Owner *pbresource.ID
	// Wanted is the owner CreateOrUpdateOwned was given.
	Wanted *pbresource.ID
}

// Stale reports whether the resource is owned by an earlier lifetime of the
// wanted owner (the same name, another Uid): that owner was deleted, and
// the reaper deletes the resource soon.
func (e *AlreadyOwnedError) Stale() bool {
	return e.Owner != nil && e.Owner.Uid != e.Wanted.Uid && sameOwnerName(e.Owner, e.Wanted)
}

// Error says whose the resource is and what to do.
func (e *AlreadyOwnedError) Error() string {
	res, wanted := resource.IDString(e.Resource), resource.IDString(e.Wanted)
	switch {
	case e.Owner == nil:
		return fmt.Sprintf("upsert: %s is not owned by %s: it has no owner, and an owner can only be set when a resource is created; "+
			"delete it, or give the owned resource another name", res, wanted)
	case e.Stale():
		return fmt.Sprintf("upsert: %s is owned by %s, an earlier lifetime of %s (deleted and created again): "+
			"the reaper deletes it soon, and its deletion reconciles the owner again if the owned type is watched with WithOwned; "+
			"pass upsert.ReplaceStale() to replace it now", res, resource.IDString(e.Owner), wanted)
	}
	return fmt.Sprintf("upsert: %s is owned by %s, not %s, and an owner cannot change; "+
		"delete it, or give the owned resource another name", res, resource.IDString(e.Owner), wanted)
}

// checkOwner returns stored if it is the round owner's, nil if it was a
// stale resource that ReplaceStale deleted and that is gone, or an error
// saying whose it is.
func (r round) checkOwner(ctx context.Context, stored *pbresource.Resource) (*pbresource.Resource, error) {
	if stored.Owner.GetUid() == r.owner.Uid {
		return stored, nil
	}
	owned := &AlreadyOwnedError{Resource: stored.Id, Owner: stored.Owner, Wanted: r.owner}
	if !r.replace || !owned.Stale() {
		return nil, owned
	}
	if err := lifetime.Delete(ctx, r.client, stored.Id); err != nil {
		return nil, fmt.Errorf("upsert: deleting %s, owned by an earlier lifetime of %s: %w",
			resource.IDString(stored.Id), resource.IDString(r.owner), err)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
	rsp, err := r.client.Read(ctx, &pbresource.ReadRequest{Id: &pbresource.ID{Type: stored.Id.Type, Tenancy: stored.Id.Tenancy, Name: stored.Id.Name}})
	switch {
	case status.Code(err) == codes.NotFound:
		return nil, nil
	case err != nil:
		return nil, err
	case rsp.Resource.Id.Uid == stored.Id.Uid:
		return nil, &replacePendingError{stale: rsp.Resource}
	}
	// Created again meanwhile, by someone else: start over from it.
	return nil, status.Errorf(codes.Aborted, "upsert: %s was created again while its stale predecessor was deleted", resource.IDString(rsp.Resource.Id))
}

// sameOwnerName reports whether a and b name the same owner, Uid and
// GroupVersion aside; an empty tenancy unit is its default.
func sameOwnerName(a, b *pbresource.ID) bool {
	return a.Name == b.Name && resource.EqualUnversionedType(a.Type, b.Type) &&
		unit(a.Tenancy.GetPartition()) == unit(b.Tenancy.GetPartition()) &&
		unit(a.Tenancy.GetNamespace()) == unit(b.Tenancy.GetNamespace())
}

func unit(name string) string {
	if name == "" {
		return "default"
	}
	return name
}
