package inmem

import (
	"context"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

var _ storage.Counter = (*Backend)(nil)

// tenancyUnits is a tenancy within a type's counts.
type tenancyUnits struct{ partition, namespace string }

// tenancyCount is what a type counts in one tenancy (storage.Count's
// numbers).
type tenancyCount struct{ resources, marked int64 }

// count records in ti's counts a write of res over prev (nil: a create)
// or, with deleted, the deletion of res (prev is res). A write that
// neither creates nor changes the deletion mark, the common one, does not
// touch the map. The caller holds mu exclusively.
func (ti *typeIndex) count(res, prev *pbresource.Resource, deleted bool) {
	var dRes, dMarked int64
	marked := resource.IsMarkedForDeletion(res)
	switch {
	case deleted:
		dRes = -1
		if marked {
			dMarked = -1
		}
	case prev == nil:
		dRes = 1
		if marked {
			dMarked = 1
		}
	case marked != resource.IsMarkedForDeletion(prev):
		dMarked = 1
		if !marked {
			dMarked = -1
		}
	default:
		return
	}
	t := res.Id.GetTenancy()
	k := tenancyUnits{t.GetPartition(), t.GetNamespace()}
	c := ti.counts[k]
	if c == nil {
		if ti.counts == nil {
			ti.counts = make(map[tenancyUnits]*tenancyCount)
		}
		c = new(tenancyCount)
		ti.counts[k] = c
	}
	c.resources += dRes
	c.marked += dMarked
	if c.resources == 0 {
		delete(ti.counts, k) // tenancies come and go: keep only those in use
	}
}

// Stats returns the count of every type and tenancy holding resources
// (storage.Counter), kept by every write under the store's lock: a call
// costs what the number of types and tenancies costs. The counts are at
// the store's current version.
func (b *Backend) Stats(context.Context) ([]storage.Count, error) {
	b.mu.RLock()
	var out []storage.Count
	for typ, ti := range b.types {
		for k, c := range ti.counts {
			out = append(out, storage.Count{Type: typ, Partition: k.partition, Namespace: k.namespace,
				Resources: c.resources, Marked: c.marked})
		}
	}
	b.mu.RUnlock()
	storage.SortCounts(out)
	return out, nil
}
