package resource

import (
	"bytes"
	"maps"

	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The copies below are written out field by field: they cost a fraction of
// proto.Clone, which matters on the read paths that copy every resource they
// hand out. clone_test.go fills every field of every message by reflection
// and compares with proto.Clone, so a field added to resource.proto and
// forgotten here fails the tests.

// resourceBlock holds the fixed-size messages of one copied resource, so a
// copy costs one allocation for all of them instead of one each. The
// messages are built in place, never copied by value.
type resourceBlock struct {
	res          pbresource.Resource
	id           pbresource.ID
	idType       pbresource.Type
	idTenancy    pbresource.Tenancy
	owner        pbresource.ID
	ownerType    pbresource.Type
	ownerTenancy pbresource.Tenancy
	data         anypb.Any
}

// Clone returns a deep copy of res.
func Clone(res *pbresource.Resource) *pbresource.Resource {
	if res == nil {
		return nil
	}
	b := new(resourceBlock)
	out := &b.res
	out.Version = res.Version
	out.Generation = res.Generation
	if id := res.Id; id != nil {
		out.Id = &b.id
		copyID(out.Id, &b.idType, &b.idTenancy, id)
	}
	if owner := res.Owner; owner != nil {
		out.Owner = &b.owner
		copyID(out.Owner, &b.ownerType, &b.ownerTenancy, owner)
	}
	if res.Metadata != nil {
		out.Metadata = maps.Clone(res.Metadata)
	}
	if d := res.Data; d != nil {
		out.Data = &b.data
		out.Data.TypeUrl = d.TypeUrl
		out.Data.Value = bytes.Clone(d.Value)
	}
	if res.Status != nil {
		out.Status = make(map[string]*pbresource.Status, len(res.Status))
		for k, v := range res.Status {
			out.Status[k] = CloneStatus(v)
		}
	}
	return out
}

// copyID fills dst (with typ and ten as its Type and Tenancy, when src has
// them) from src.
func copyID(dst *pbresource.ID, typ *pbresource.Type, ten *pbresource.Tenancy, src *pbresource.ID) {
	dst.Uid = src.Uid
	dst.Name = src.Name
	if t := src.Type; t != nil {
		typ.Group, typ.GroupVersion, typ.Kind = t.Group, t.GroupVersion, t.Kind
		dst.Type = typ
	}
	if t := src.Tenancy; t != nil {
		ten.Partition, ten.Namespace = t.Partition, t.Namespace
		dst.Tenancy = ten
	}
}

// idBlock is resourceBlock's counterpart for a lone ID.
type idBlock struct {
	id      pbresource.ID
	typ     pbresource.Type
	tenancy pbresource.Tenancy
}

// CloneID returns a deep copy of id.
func CloneID(id *pbresource.ID) *pbresource.ID {
	if id == nil {
		return nil
	}
	b := new(idBlock)
	copyID(&b.id, &b.typ, &b.tenancy, id)
	return &b.id
}

// CloneStatus returns a deep copy of s.
func CloneStatus(s *pbresource.Status) *pbresource.Status {
	if s == nil {
		return nil
	}
	out := &pbresource.Status{ObservedGeneration: s.ObservedGeneration}
	if s.Conditions != nil {
		out.Conditions = make([]*pbresource.Condition, len(s.Conditions))
		for i, c := range s.Conditions {
			out.Conditions[i] = CloneCondition(c)
		}
	}
	if s.UpdatedAt != nil {
		out.UpdatedAt = &timestamppb.Timestamp{Seconds: s.UpdatedAt.Seconds, Nanos: s.UpdatedAt.Nanos}
	}
	return out
}

// CloneCondition returns a deep copy of c.
func CloneCondition(c *pbresource.Condition) *pbresource.Condition {
	if c == nil {
		return nil
	}
	return &pbresource.Condition{Type: c.Type, State: c.State, Reason: c.Reason, Message: c.Message, Resource: CloneReference(c.Resource)}
}

// CloneReference returns a deep copy of r.
func CloneReference(r *pbresource.Reference) *pbresource.Reference {
	if r == nil {
		return nil
	}
	return &pbresource.Reference{Type: cloneType(r.Type), Tenancy: cloneTenancy(r.Tenancy), Name: r.Name, Section: r.Section}
}

// CloneAny returns a deep copy of a.
func CloneAny(a *anypb.Any) *anypb.Any {
	if a == nil {
		return nil
	}
	return &anypb.Any{TypeUrl: a.TypeUrl, Value: bytes.Clone(a.Value)}
}

// CloneIDs returns deep copies of ids, made with one allocation for all of
// them (the copies stay alive together).
func CloneIDs(ids []*pbresource.ID) []*pbresource.ID {
	blocks := make([]idBlock, len(ids))
	out := make([]*pbresource.ID, len(ids))
	for i, id := range ids {
		if id == nil {
			continue
		}
		b := &blocks[i]
		copyID(&b.id, &b.typ, &b.tenancy, id)
		out[i] = &b.id
	}
	return out
}
