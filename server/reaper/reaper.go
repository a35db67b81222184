// Package reaper is the built-in controller that carries out cascading
// deletion. When a resource that owns others is deleted, the ResourceService
// stores a Tombstone naming it in the same atomic step; this controller
// deletes every resource the owner had (their own deletion writes further
// tombstones, so the cascade reaches grandchildren) and then the tombstone.
// Tombstones are stored like any resource, so a restart in the middle picks
// up where it stopped. It is written on the public controller API like any
// user's controller.
//
// Nothing can be created with an owner once the owner is gone (the backend
// checks the owner at commit), so the owned resources the reaper lists
// after the owner's deletion are all there will ever be.
package reaper

import (
	"context"
	"fmt"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/internal/lifetime"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// ControllerName is the name of the reaper controller.
const ControllerName = "tombstone-reaper"

// Controller returns the reaper controller, ready to Register.
func Controller() *controller.Controller {
	return controller.NewController(ControllerName, resource.TypeV1Tombstone).
		WithReconciler(reconcile.AsDecoded(reap, reconcile.OnUndecodable(dropUnreadable)))
}

// reap deletes what the tombstone's owner owned, then the tombstone.
func reap(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, decoded *resource.Decoded[*pbresource.Tombstone]) error {
	tomb := decoded.Resource
	owner := decoded.Data.GetOwner()
	if owner.GetUid() == "" {
		rt.Logger.Error("dropping tombstone without an owner uid", "tombstone", resource.IDString(tomb.Id))
		return deleteTombstone(ctx, rt, tomb)
	}

	alive, err := ownerExists(ctx, rt, owner)
	if err != nil {
		return err
	}
	if alive {
		// The service stores a tombstone only as its owner goes, in the
		// same step, and refuses tombstones from clients: this one does
		// not promise anything (a leftover of an older server, say).
		// Reaping would delete what a live owner owns; drop it instead.
		rt.Logger.Warn("dropping tombstone whose owner exists", "tombstone", resource.IDString(tomb.Id), "owner", resource.IDString(owner))
		return deleteTombstone(ctx, rt, tomb)
	}

	// In pages, so that an owner of many resources does not make one huge
	// reply. A server that does not page (Consul) sends them all at once.
	// A listing whose version the store no longer has fails the reconcile
	// (Aborted), which is retried with a new listing. A page at the
	// listing's version, older than the resources' current state, names
	// nothing the owner no longer owns: an owner cannot be changed once
	// set, and a delete names the resource's Uid, so one deleted and
	// created again meanwhile is not the one deleted.
	req := &pbresource.ListByOwnerRequest{Owner: owner, PageSize: pageSize}
	for {
		rsp, err := rt.Client.ListByOwner(ctx, req)
		if err != nil {
			return fmt.Errorf("listing what %s owned: %w", resource.IDString(owner), err)
		}
		for _, child := range rsp.Resources {
			if resource.IsMarkedForDeletion(child) {
				continue // its finalizers' controllers finish the job
			}
			// Aimed at the child's Uid: a child deleted meanwhile and
			// created again under its name (by the owner's new lifetime,
			// with upsert.ReplaceStale) is not this owner's, and is spared.
			if err := lifetime.Delete(ctx, rt.Client, child.Id); err != nil {
				return fmt.Errorf("deleting %s (owned by %s): %w", resource.IDString(child.Id), resource.IDString(owner), err)
			}
			rt.Logger.Debug("deleted owned resource", "resource", resource.IDString(child.Id), "owner", resource.IDString(owner))
		}
		if rsp.NextPageToken == "" {
			break
		}
		req.PageToken = rsp.NextPageToken
	}
	return deleteTombstone(ctx, rt, tomb)
}

// pageSize is how many owned resources the reaper lists at a time.
const pageSize = 1000

// ownerExists reads the owner (that lifetime of it, by Uid) consistently.
func ownerExists(ctx context.Context, rt reconcile.Runtime, owner *pbresource.ID) (bool, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
	_, err := rt.Client.Read(ctx, &pbresource.ReadRequest{Id: owner})
	switch status.Code(err) {
	case codes.OK:
		return true, nil
	case codes.NotFound:
		return false, nil
	case codes.InvalidArgument:
		// The owner's type is no longer registered (or is stored under
		// another version); nothing can own through it any more.
		return false, nil
	}
	return false, fmt.Errorf("reading owner %s: %w", resource.IDString(owner), err)
}

// dropUnreadable deletes a tombstone that cannot be read: it can never be
// carried out.
func dropUnreadable(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, tomb *pbresource.Resource, err error) error {
	rt.Logger.Error("dropping unreadable tombstone", "tombstone", resource.IDString(tomb.Id), "error", err)
	return deleteTombstone(ctx, rt, tomb)
}

func deleteTombstone(ctx context.Context, rt reconcile.Runtime, tomb *pbresource.Resource) error {
	_, err := rt.Client.Delete(ctx, &pbresource.DeleteRequest{Id: tomb.Id})
	if err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("deleting tombstone %s: %w", resource.IDString(tomb.Id), err)
	}
	return nil
}
