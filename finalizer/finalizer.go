// Package finalizer helps controllers hold back the deletion of resources
// until they have cleaned up after them.
//
// Finalizers are names stored, separated by spaces, under the "finalizers"
// metadata key. Deleting a resource that has finalizers only marks it (the
// service sets the "deletionTimestamp" key); the resource is then frozen
// except for writes that remove finalizers, and the service deletes it when
// the last one goes. Each controller that adds a finalizer removes it once
// it sees the mark and has done its cleanup.
package finalizer

import (
	"context"
	"maps"
	"strings"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/runtime"
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

// EnsureHasFinalizer writes res with the named finalizer added, unless it
// has it already. The write is a compare-and-swap on res.Version, so a stale
// res (e.g. from a lagging cache) fails with Aborted rather than undoing a
// newer write; return the error to retry later. res is not changed.
func EnsureHasFinalizer(ctx context.Context, rt runtime.Runtime, res *pbresource.Resource, name string) error {
	if HasFinalizer(res, name) {
		return nil
	}
	return writeMetadata(ctx, rt, res, func(r *pbresource.Resource) { AddFinalizer(r, name) })
}

// EnsureFinalizerRemoved writes res with the named finalizer removed, unless
// it is absent. When res is marked for deletion and this was its last
// finalizer, the service deletes it. Like EnsureHasFinalizer, the write is a
// compare-and-swap and res is not changed.
func EnsureFinalizerRemoved(ctx context.Context, rt runtime.Runtime, res *pbresource.Resource, name string) error {
	if !HasFinalizer(res, name) {
		return nil
	}
	return writeMetadata(ctx, rt, res, func(r *pbresource.Resource) { RemoveFinalizer(r, name) })
}

func writeMetadata(ctx context.Context, rt runtime.Runtime, res *pbresource.Resource, change func(*pbresource.Resource)) error {
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
	_, err := rt.Client.Write(ctx, &pbresource.WriteRequest{Resource: next})
	return err
}
