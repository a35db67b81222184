package storage

import (
	"cmp"
	"context"
	"slices"
)

// Count is how many resources of one type are stored in one tenancy.
type Count struct {
	// Type is the resources' type.
	Type UnversionedType

	// Partition and Namespace are the tenancy's units, as stored (empty
	// for a unit the type's scope does not have).
	Partition, Namespace string

	// Resources is how many are stored, those marked for deletion
	// included.
	Resources int64

	// Marked is how many of them are marked for deletion: deleted while
	// they had finalizers, and waiting for them to be removed.
	Marked int64
}

// Counter is a Backend that keeps counts of its resources as they are
// written and deleted, so reading them costs what the number of types and
// tenancies costs, never a scan of the resources. The server serves them
// (loom.catalog.v1's GetStats) and the host exports them as metrics.
type Counter interface {
	// Stats returns the count of every type and tenancy with at least one
	// resource, ordered by SortCounts. The counts are those of one store
	// version, which may lag the latest writes (the in-memory backend's do
	// not; the etcd backend's by the time its change feed takes to receive
	// them, as watches do).
	Stats(ctx context.Context) ([]Count, error)
}

// SortCounts orders counts by type (Group, Kind), partition and namespace.
func SortCounts(counts []Count) {
	slices.SortFunc(counts, func(a, b Count) int {
		return cmp.Or(cmp.Compare(a.Type.Group, b.Type.Group), cmp.Compare(a.Type.Kind, b.Type.Kind),
			cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Namespace, b.Namespace))
	})
}
