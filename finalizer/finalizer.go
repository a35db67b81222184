// Package finalizer helps controllers hold back the deletion of resources
// until they have cleaned up after them.
//
// Finalizers are names stored, separated by spaces, under the "finalizers"
// metadata key. Deleting a resource that has finalizers only marks it (the
// service sets the "deletionTimestamp" key); the resource is then frozen
// except for writes that remove finalizers, and the service deletes it when
// the last one goes. Each controller that adds a finalizer removes it once
// it sees the mark and has done its cleanup. (Consul's service does not
// delete a marked resource when its last finalizer goes, only on a further
// Delete; EnsureFinalizerRemoved issues that Delete, so controllers behave
// the same on both.)
package finalizer

import (
	"context"
	"maps"
	"strings"

	"github.com/loomrt/loom/internal/lifetime"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
)

// IsMarkedForDeletion reports whether res was deleted and waits for its
// finalizers to be removed.
func IsMarkedForDeletion(res *pbresource.Resource) bool {
	return resource.IsMarkedForDeletion(res)
}

// HasFinalizers reports whether res has at least one finalizer.
func HasFinalizers(res *pbresource.Resource) bool {
	return len(resource.Finalizers(res)) > 0
}

// HasFinalizer reports whether res has the named finalizer.
func HasFinalizer(res *pbresource.Resource, name string) bool {
	for _, f := range resource.Finalizers(res) {
		if f == name {
			return true
		}
	}
	return false
}

// GetFinalizers returns res's finalizers, in stored order, without
// duplicates.
func GetFinalizers(res *pbresource.Resource) []string {
	return resource.Finalizers(res)
}

// AddFinalizer adds the named finalizer to res's metadata (in memory; write
// the resource to store it). Adding one that is there already does nothing.
func AddFinalizer(res *pbresource.Resource, name string) {
	if HasFinalizer(res, name) {
		return
	}
	setFinalizers(res, append(resource.Finalizers(res), name))
}

// RemoveFinalizer removes the named finalizer from res's metadata (in
// memory; write the resource to store it).
func RemoveFinalizer(res *pbresource.Resource, name string) {
	current := resource.Finalizers(res)
	kept := current[:0]
	for _, f := range current {
		if f != name {
			kept = append(kept, f)
		}
	}
	setFinalizers(res, kept)
}

func setFinalizers(res *pbresource.Resource, names []string) {
	if len(names) == 0 {
		delete(res.Metadata, resource.FinalizerKey)
		return
	}
	if res.Metadata == nil {
		res.Metadata = map[string]string{}
	}
	res.Metadata[resource.FinalizerKey] = strings.Join(names, " ")
}

// EnsureHasFinalizer makes sure res carries the named finalizer in the
// store, and returns the resource as stored: the result of the write (with
// its new version and generation), or res itself when it had the finalizer
// already. Continue with the returned resource, so that what follows (a
// status, say, whose ObservedGeneration comes from it) is about the current
// generation:
//
//	res, err = finalizer.EnsureHasFinalizer(ctx, rt, res, name)
//
// The write is a compare-and-swap on res.Version, so a stale res (e.g. from
// a lagging cache) fails with Aborted rather than undoing a newer write;
// return the error to retry later. res itself is not changed.
func EnsureHasFinalizer(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource, name string) (*pbresource.Resource, error) {
	if HasFinalizer(res, name) {
		return res, nil
	}
	return writeMetadata(ctx, rt, res, func(r *pbresource.Resource) { AddFinalizer(r, name) })
}

// EnsureFinalizerRemoved makes sure res does not carry the named finalizer
// in the store, and returns the resource as stored afterwards, or nil when
// it is gone. Like EnsureHasFinalizer, the write is a compare-and-swap on
// res.Version and res itself is not changed.
//
// When res is marked for deletion and no finalizer is left, the resource is
// deleted. Loom's service deletes it with the Write that removes the last
// finalizer; Consul's leaves it marked until it is deleted again, so the
// helper then issues a Delete itself (harmless on Loom, where the resource
// is gone already). The Delete names res's Uid, so it never touches a
// resource created again under the same name, and a resource already gone
// counts as deleted. It carries no version: a marked resource without
// finalizers can change only by status writes, which must not make the
// deletion fail. The Delete is issued too when res has no finalizer left
// to remove, so a retry after a failed Delete completes the deletion.
func EnsureFinalizerRemoved(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource, name string) (*pbresource.Resource, error) {
	current := res
	if HasFinalizer(res, name) {
		written, err := writeMetadata(ctx, rt, res, func(r *pbresource.Resource) { RemoveFinalizer(r, name) })
		if err != nil {
			return nil, err
		}
		current = written
	}
	if !IsMarkedForDeletion(current) || HasFinalizers(current) {
		return current, nil
	}
	if err := lifetime.Delete(ctx, rt.Client, current.Id); err != nil {
		return nil, err
	}
	return nil, nil
}

func writeMetadata(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource, change func(*pbresource.Resource)) (*pbresource.Resource, error) {
	// A shallow copy with its own metadata: only the metadata changes, and
	// the client does not keep the request. The status is left out: the
	// service carries the stored one over, and a stale copy must not look
	// like an attempt to change it.
	next := &pbresource.Resource{
		Id:         res.Id,
		Owner:      res.Owner,
		Version:    res.Version,
		Generation: res.Generation,
		Metadata:   maps.Clone(res.Metadata),
		Data:       res.Data,
	}
	change(next)
	rsp, err := rt.Client.Write(ctx, &pbresource.WriteRequest{Resource: next})
	if err != nil {
		return nil, err
	}
	return rsp.Resource, nil
}
