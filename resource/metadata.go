package resource

import (
	"slices"
	"strings"
	"unicode"

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
// stored order, without duplicates or empty names. It takes time linear in
// the length of the stored value.
func Finalizers(res *pbresource.Resource) []string {
	raw := res.GetMetadata()[FinalizerKey]
	if raw == "" {
		return nil
	}
	fields := strings.Fields(raw)
	return dedupe(fields)
}

// HasFinalizers reports whether res's metadata names at least one
// finalizer. Unlike len(Finalizers(res)) > 0 it allocates nothing.
func HasFinalizers(res *pbresource.Resource) bool {
	raw := res.GetMetadata()[FinalizerKey]
	return strings.IndexFunc(raw, func(r rune) bool { return !unicode.IsSpace(r) }) >= 0
}

// smallSet is the size up to which comparing every pair is cheaper than
// hashing: no allocation, and at most smallSet²/2 string comparisons.
const smallSet = 16

// dedupe removes repeated strings from list in place, keeping the first of
// each, and returns the shortened list.
func dedupe(list []string) []string {
	out := list[:0]
	if len(list) <= smallSet {
		for _, f := range list {
			if !slices.Contains(out, f) {
				out = append(out, f)
			}
		}
		return out
	}
	seen := make(map[string]struct{}, len(list))
	for _, f := range list {
		if _, dup := seen[f]; !dup {
			seen[f] = struct{}{}
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
