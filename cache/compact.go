package cache

import (
	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/types/known/anypb"
)

// compactBlock is the cache's own copy of a resource's fixed-size messages,
// made in one allocation. The ID points at the Type and Tenancy messages the
// type shares between all its entries, so a cached resource carries no copy
// of either.
type compactBlock struct {
	entry entry
	res   pbresource.Resource
	id    pbresource.ID
	data  anypb.Any
}

// compact returns the copy of res the cache keeps: the messages around the
// data are rebuilt small (and, for the ID's type and tenancy, shared), while
// the strings, the data bytes, the metadata, the statuses and the owner are
// taken over as they are. The cache owns res (see Upsert), so taking them over is safe,
// and whatever else res held becomes garbage. The entry that will hold the
// copy comes in the same allocation.
func (tc *typeCache) compact(res *pbresource.Resource) *entry {
	b := new(compactBlock)
	out := &b.res
	b.entry.res = out
	b.entry.refs = b.entry.inline[:0]
	out.Version = res.Version
	out.Generation = res.Generation
	out.Metadata = res.Metadata
	out.Status = res.Status
	if id := res.Id; id != nil {
		b.id.Uid = id.Uid
		b.id.Name = id.Name
		b.id.Type = tc.sharedType(id.Type)
		b.id.Tenancy = tc.sharedTenancy(id.Tenancy)
		out.Id = &b.id
	}
	// The owner ID is taken over as it is: it is a message of its own when
	// decoded from the wire, and the server's own when shared in process.
	out.Owner = res.Owner
	if d := res.Data; d != nil {
		b.data.TypeUrl = d.TypeUrl
		b.data.Value = d.Value
		out.Data = &b.data
	}
	return &b.entry
}

// sharedType returns the type's shared copy of t (by GroupVersion: all
// entries have the same Group and Kind).
func (tc *typeCache) sharedType(t *pbresource.Type) *pbresource.Type {
	if t == nil {
		return nil
	}
	if shared, ok := tc.types[t.GroupVersion]; ok {
		return shared
	}
	shared := &pbresource.Type{Group: t.Group, GroupVersion: t.GroupVersion, Kind: t.Kind}
	tc.types[t.GroupVersion] = shared
	return shared
}

// sharedTenancy returns the type's shared copy of t.
func (tc *typeCache) sharedTenancy(t *pbresource.Tenancy) *pbresource.Tenancy {
	if t == nil {
		return nil
	}
	k := idKey{partition: t.Partition, namespace: t.Namespace}
	if shared, ok := tc.tenancies[k]; ok {
		return shared
	}
	shared := &pbresource.Tenancy{Partition: t.Partition, Namespace: t.Namespace}
	tc.tenancies[k] = shared
	return shared
}
