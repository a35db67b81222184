package resource

import (
	"strings"

	"github.com/loomrt/loom/proto/pbresource"
)

const (
	// FinalizerKey is the metadata key holding a resource's finalizers,
	// separated by spaces.
	FinalizerKey = "finalizers"

	// DeletionTimestampKey is the metadata key the service sets (to an RFC
	// 3339 time) when a resource with finalizers is deleted. It cannot be set
	// or changed by a Write.
	DeletionTimestampKey = "deletionTimestamp"
)

// Finalizers returns the finalizer names stored in res's metadata, in their
// stored order, without duplicates or empty names.
func Finalizers(res *pbresource.Resource) []string {
	raw := res.GetMetadata()[FinalizerKey]
	if raw == "" {
		return nil
	}
	fields := strings.Fields(raw)
	out := fields[:0]
	for _, f := range fields {
		dup := false
		for _, seen := range out {
			if seen == f {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, f)
		}
	}
	return out
}

// IsMarkedForDeletion reports whether res was deleted while it still had
// finalizers, and now waits for them to be removed.
func IsMarkedForDeletion(res *pbresource.Resource) bool {
	_, ok := res.GetMetadata()[DeletionTimestampKey]
	return ok
}
