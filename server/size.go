package server

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
)

// The sizes below are proto.Size's, computed field by field: proto.Size
// walks a message's fields through its generic tables, and a map field by
// reflection with an allocation, several times the time of these loops, and
// the size limit sizes every write. The messages' string fields come from
// internal/pblayout (whose test checks them against the descriptors); the
// status messages, sized here alone, are listed below. TestResourceSize
// checks the result against proto.Size with every field set.

// Field numbers of the status messages (resource.proto).
const (
	statusObservedGeneration protowire.Number = 1 // string
	statusConditions         protowire.Number = 2 // repeated Condition
	statusUpdatedAt          protowire.Number = 3 // google.protobuf.Timestamp
	conditionType            protowire.Number = 1 // string
	conditionState           protowire.Number = 2 // enum
	conditionReason          protowire.Number = 3 // string
	conditionMessage         protowire.Number = 4 // string
	conditionResource        protowire.Number = 5 // Reference
	referenceType            protowire.Number = 1 // Type
	referenceTenancy         protowire.Number = 2 // Tenancy
	referenceName            protowire.Number = 3 // string
	referenceSection         protowire.Number = 4 // string
	timestampSeconds         protowire.Number = 1 // int64
	timestampNanos           protowire.Number = 2 // int32
)

// resourceSize is proto.Size(res).
func resourceSize(res *pbresource.Resource) int {
	strs := pblayout.ResourceStrings(res)
	n := len(res.ProtoReflect().GetUnknown()) + stringsSize(strs[:])
	if res.Id != nil {
		n += fieldSize(pblayout.ResourceID, idSize(res.Id))
	}
	if res.Owner != nil {
		n += fieldSize(pblayout.ResourceOwner, idSize(res.Owner))
	}
	return n + metadataSize(res.Metadata) + statusSize(res.Status) + dataSize(res.Data)
}

// metadataSize is the encoded size of a Resource's metadata field (a map
// entry per key, with both its key and value).
func metadataSize(meta map[string]string) int {
	n := 0
	for k, v := range meta {
		n += fieldSize(pblayout.ResourceMetadata, fieldSize(pblayout.MapKey, len(k))+fieldSize(pblayout.MapValue, len(v)))
	}
	return n
}

// statusSize is the encoded size of a Resource's status field.
func statusSize(st map[string]*pbresource.Status) int {
	n := 0
	for k, v := range st {
		n += statusEntrySize(k, v)
	}
	return n
}

// statusEntrySize is the encoded size of one entry of a Resource's status
// field.
func statusEntrySize(k string, v *pbresource.Status) int {
	return fieldSize(pblayout.ResourceStatus, fieldSize(pblayout.MapKey, len(k))+fieldSize(pblayout.MapValue, oneStatusSize(v)))
}

// dataSize is the encoded size of a Resource's data field.
func dataSize(a *anypb.Any) int {
	if a == nil {
		return 0
	}
	strs := pblayout.AnyStrings(a)
	n := len(a.ProtoReflect().GetUnknown()) + stringsSize(strs[:])
	if len(a.Value) > 0 {
		n += fieldSize(pblayout.AnyValue, len(a.Value))
	}
	return fieldSize(pblayout.ResourceData, n)
}

// idSize is proto.Size(id).
func idSize(id *pbresource.ID) int {
	strs := pblayout.IDStrings(id)
	n := len(id.ProtoReflect().GetUnknown()) + stringsSize(strs[:])
	if id.Type != nil {
		n += fieldSize(pblayout.IDType, typeSize(id.Type))
	}
	if id.Tenancy != nil {
		n += fieldSize(pblayout.IDTenancy, tenancySize(id.Tenancy))
	}
	return n
}

func typeSize(t *pbresource.Type) int {
	strs := pblayout.TypeStrings(t)
	return len(t.ProtoReflect().GetUnknown()) + stringsSize(strs[:])
}

func tenancySize(t *pbresource.Tenancy) int {
	strs := pblayout.TenancyStrings(t)
	return len(t.ProtoReflect().GetUnknown()) + stringsSize(strs[:])
}

// oneStatusSize is proto.Size(st).
func oneStatusSize(st *pbresource.Status) int {
	if st == nil {
		return 0
	}
	n := len(st.ProtoReflect().GetUnknown()) + stringSize(statusObservedGeneration, st.ObservedGeneration)
	for _, c := range st.Conditions {
		n += fieldSize(statusConditions, conditionSize(c))
	}
	if st.UpdatedAt != nil {
		n += fieldSize(statusUpdatedAt, timestampSize(st.UpdatedAt))
	}
	return n
}

func conditionSize(c *pbresource.Condition) int {
	if c == nil {
		return 0
	}
	n := len(c.ProtoReflect().GetUnknown()) + stringSize(conditionType, c.Type) + stringSize(conditionReason, c.Reason) +
		stringSize(conditionMessage, c.Message)
	if c.State != 0 {
		n += protowire.SizeTag(conditionState) + protowire.SizeVarint(uint64(int64(c.State)))
	}
	if r := c.Resource; r != nil {
		m := len(r.ProtoReflect().GetUnknown()) + stringSize(referenceName, r.Name) + stringSize(referenceSection, r.Section)
		if r.Type != nil {
			m += fieldSize(referenceType, typeSize(r.Type))
		}
		if r.Tenancy != nil {
			m += fieldSize(referenceTenancy, tenancySize(r.Tenancy))
		}
		n += fieldSize(conditionResource, m)
	}
	return n
}

func timestampSize(ts *timestamppb.Timestamp) int {
	n := len(ts.ProtoReflect().GetUnknown())
	if ts.Seconds != 0 {
		n += protowire.SizeTag(timestampSeconds) + protowire.SizeVarint(uint64(ts.Seconds))
	}
	if ts.Nanos != 0 {
		n += protowire.SizeTag(timestampNanos) + protowire.SizeVarint(uint64(int64(ts.Nanos)))
	}
	return n
}

// stringsSize is the encoded size of the string fields of a message's
// layout table (see pblayout), indexed by field number.
func stringsSize(fields []*string) int {
	n := 0
	for num, p := range fields {
		if p != nil {
			n += stringSize(protowire.Number(num), *p)
		}
	}
	return n
}

// stringSize is the encoded size of string field num holding s (nothing
// when s is empty).
func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return fieldSize(num, len(s))
}

// fieldSize is the encoded size of a length-delimited field with field
// number num and n bytes of content.
func fieldSize(num protowire.Number, n int) int {
	return protowire.SizeTag(num) + protowire.SizeBytes(n)
}
