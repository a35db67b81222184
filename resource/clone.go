package resource

import (
	"bytes"
	"maps"
	"reflect"
	"time"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// The copies below are written out field by field: they cost a fraction of
// proto.Clone, which matters on the read paths that copy every resource they
// hand out. The fields of a Resource, its IDs, Types, Tenancies and Data
// come from internal/pblayout, the one description of that layout (which
// the etcd backend's decoder shares, and whose test checks it against the
// generated descriptors); the statuses are copied here alone. clone_test.go
// fills every field of every message by reflection and compares with
// proto.Clone, so a field added to resource.proto and forgotten fails the
// tests.

// Clone returns a deep copy of res.
func Clone(res *pbresource.Resource) *pbresource.Resource {
	if res == nil {
		return nil
	}
	b := new(pblayout.Block)
	out := &b.Resource
	src, dst := pblayout.ResourceStrings(res), pblayout.ResourceStrings(out)
	pblayout.CopyStrings(dst[:], src[:])
	if id := res.Id; id != nil {
		b.SetID().CopyID(id)
	}
	if owner := res.Owner; owner != nil {
		b.SetOwner().CopyID(owner)
	}
	if res.Metadata != nil {
		out.Metadata = maps.Clone(res.Metadata)
	}
	if d := res.Data; d != nil {
		copyAny(b.SetData(), d)
	}
	if res.Status != nil {
		out.Status = cloneStatusMap(res.Status)
	}
	return out
}

// CloneSharing returns a copy of res that shares with prev every part res
// shares with it: the same ID, owner, data, metadata map or status
// messages. The rest is copied deeply, as by Clone. prev must be immutable
// (a stored message, see the package doc), so sharing its parts is safe;
// a read-modify-write that took parts of a stored resource over unchanged
// then costs no copy of them. A nil prev makes it Clone.
func CloneSharing(res, prev *pbresource.Resource) *pbresource.Resource {
	return CloneSharingID(res, prev, nil)
}

// CloneSharingID is CloneSharing, except that when res.Id is copied, the
// copy takes the Type and Tenancy of like, an immutable ID (e.g. one a
// store keeps), where they equal res.Id's, instead of copies of them: a
// store that keeps many resources of one type and tenancy then keeps one
// Type and one Tenancy for all of them. like may be nil.
func CloneSharingID(res, prev *pbresource.Resource, like *pbresource.ID) *pbresource.Resource {
	if res == nil {
		return nil
	}
	if prev == nil {
		if like == nil {
			return Clone(res)
		}
		prev = &noResource
	}
	var out *pbresource.Resource
	var b *pblayout.Block
	var sb *pblayout.SharedBlock
	id := res.Id
	shareID := id != nil && id != prev.Id && like != nil && id.Type != nil && id.Tenancy != nil &&
		EqualType(id.Type, like.Type) && EqualTenancy(id.Tenancy, like.Tenancy)
	switch {
	case shareID:
		sb = new(pblayout.SharedBlock)
		out = &sb.Resource
	case id == prev.Id && res.Data == prev.Data:
		out = new(pbresource.Resource) // the common case: no block needed
	default:
		b = new(pblayout.Block)
		out = &b.Resource
	}
	src, dst := pblayout.ResourceStrings(res), pblayout.ResourceStrings(out)
	pblayout.CopyStrings(dst[:], src[:])
	switch {
	case id == prev.Id:
		out.Id = id
	case shareID:
		c := sb.SetID()
		s, d := pblayout.IDStrings(id), pblayout.IDStrings(c)
		pblayout.CopyStrings(d[:], s[:])
		c.Type, c.Tenancy = like.Type, like.Tenancy
	case id != nil:
		b.SetID().CopyID(id)
	}
	switch owner := res.Owner; {
	case owner == prev.Owner:
		out.Owner = owner
	case owner != nil:
		out.Owner = CloneID(owner)
	}
	switch {
	case sameMap(res.Metadata, prev.Metadata):
		out.Metadata = res.Metadata
	case res.Metadata != nil:
		out.Metadata = maps.Clone(res.Metadata)
	}
	switch d := res.Data; {
	case d == prev.Data:
		out.Data = d
	case d != nil && sb != nil:
		copyAny(sb.SetData(), d)
	case d != nil:
		copyAny(b.SetData(), d)
	}
	switch {
	case sameMap(res.Status, prev.Status):
		out.Status = res.Status
	case res.Status != nil:
		out.Status = make(map[string]*pbresource.Status, len(res.Status))
		for k, v := range res.Status {
			if pv, ok := prev.Status[k]; ok && pv == v {
				out.Status[k] = v
			} else {
				out.Status[k] = CloneStatus(v)
			}
		}
	}
	return out
}

// noResource is the prev of CloneSharingID when there is none: it shares
// nothing with a resource to copy (its nil parts are never shared, since a
// nil part needs no copy).
var noResource pbresource.Resource

// sameMap reports whether a and b are the same map (not merely equal ones).
func sameMap[M ~map[K]V, K comparable, V any](a, b M) bool {
	return a != nil && b != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// copyAny makes dst a deep copy of src.
func copyAny(dst, src *anypb.Any) {
	s, d := pblayout.AnyStrings(src), pblayout.AnyStrings(dst)
	pblayout.CopyStrings(d[:], s[:])
	dst.Value = bytes.Clone(src.Value)
}

// CloneID returns a deep copy of id.
func CloneID(id *pbresource.ID) *pbresource.ID {
	if id == nil {
		return nil
	}
	return new(pblayout.IDBlock).CopyID(id)
}

// statusBlock holds a copied Status with its UpdatedAt, in one allocation.
type statusBlock struct {
	st pbresource.Status
	ts timestamppb.Timestamp
}

// statusBlock1 is a statusBlock with room for one condition: a status of
// one condition, the common kind (a controller's one verdict), is copied
// with one allocation instead of three.
type statusBlock1 struct {
	statusBlock
	cond  pbresource.Condition
	conds [1]*pbresource.Condition
}

// CloneStatus returns a deep copy of s.
func CloneStatus(s *pbresource.Status) *pbresource.Status {
	if s == nil {
		return nil
	}
	if len(s.Conditions) == 1 {
		return new(statusBlock1).copy(s)
	}
	b := new(statusBlock)
	out := b.copy(s)
	copyConditions(out, s)
	return out
}

// CloneStatusAt returns a deep copy of s with UpdatedAt set to t, made
// with one allocation for a status of one condition, like CloneStatus.
func CloneStatusAt(s *pbresource.Status, t time.Time) *pbresource.Status {
	if s == nil {
		return nil
	}
	var b *statusBlock
	var out *pbresource.Status
	if len(s.Conditions) == 1 {
		b1 := new(statusBlock1)
		out, b = b1.copy(s), &b1.statusBlock
	} else {
		b = new(statusBlock)
		out = b.copy(s)
		copyConditions(out, s)
	}
	b.ts.Seconds, b.ts.Nanos = t.Unix(), int32(t.Nanosecond())
	out.UpdatedAt = &b.ts
	return out
}

// copyConditions makes out's conditions deep copies of s's: the conditions
// in one array, their pointers in another.
func copyConditions(out, s *pbresource.Status) {
	if s.Conditions == nil {
		return
	}
	conds := make([]pbresource.Condition, len(s.Conditions))
	out.Conditions = make([]*pbresource.Condition, len(s.Conditions))
	for i, c := range s.Conditions {
		if c != nil {
			copyCondition(&conds[i], c)
			out.Conditions[i] = &conds[i]
		}
	}
}

// copy makes the block's status a copy of s, but for the conditions, and
// returns it.
func (b *statusBlock) copy(s *pbresource.Status) *pbresource.Status {
	out := &b.st
	out.ObservedGeneration = s.ObservedGeneration
	if s.UpdatedAt != nil {
		b.ts.Seconds, b.ts.Nanos = s.UpdatedAt.Seconds, s.UpdatedAt.Nanos
		out.UpdatedAt = &b.ts
	}
	return out
}

// copy makes the block's status a deep copy of s, which has one condition,
// and returns it.
func (b *statusBlock1) copy(s *pbresource.Status) *pbresource.Status {
	out := b.statusBlock.copy(s)
	if c := s.Conditions[0]; c != nil {
		copyCondition(&b.cond, c)
		b.conds[0] = &b.cond
	}
	out.Conditions = b.conds[:] // capacity 1: an append copies
	return out
}

// cloneStatusMap returns a deep copy of m. The statuses of one condition
// are copied into one array, so that a map of several costs one
// allocation for all of them (they stay alive together).
func cloneStatusMap(m map[string]*pbresource.Status) map[string]*pbresource.Status {
	out := make(map[string]*pbresource.Status, len(m))
	var blocks []statusBlock1
	if len(m) > 1 {
		n := 0
		for _, v := range m {
			if v != nil && len(v.Conditions) == 1 {
				n++
			}
		}
		if n > 1 {
			blocks = make([]statusBlock1, n)
		}
	}
	for k, v := range m {
		if len(blocks) > 0 && v != nil && len(v.Conditions) == 1 {
			out[k] = blocks[0].copy(v)
			blocks = blocks[1:]
			continue
		}
		out[k] = CloneStatus(v)
	}
	return out
}

// CloneCondition returns a deep copy of c.
func CloneCondition(c *pbresource.Condition) *pbresource.Condition {
	if c == nil {
		return nil
	}
	out := new(pbresource.Condition)
	copyCondition(out, c)
	return out
}

// copyCondition makes dst a deep copy of src.
func copyCondition(dst, src *pbresource.Condition) {
	dst.Type, dst.State, dst.Reason, dst.Message = src.Type, src.State, src.Reason, src.Message
	dst.Resource = CloneReference(src.Resource)
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
	out := new(anypb.Any)
	copyAny(out, a)
	return out
}

// CloneIDs returns deep copies of ids, made with one allocation for all of
// them (the copies stay alive together).
func CloneIDs(ids []*pbresource.ID) []*pbresource.ID {
	blocks := make([]pblayout.IDBlock, len(ids))
	out := make([]*pbresource.ID, len(ids))
	for i, id := range ids {
		if id != nil {
			out[i] = blocks[i].CopyID(id)
		}
	}
	return out
}
