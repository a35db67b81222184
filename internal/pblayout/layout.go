// Package pblayout is the one hand-written description of resource.proto's
// layout, shared by the fast paths that build resources without the generic
// protobuf machinery: resource.Clone and the etcd backend's decoder. It
// gives the number of every message field, the Go field behind every string
// field, and the Block that the fixed-size messages of one resource are
// allocated in together. layout_test.go checks it against the generated
// descriptors, so a field added to resource.proto fails the tests until it
// is described here.
package pblayout

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/proto/pbresource"
)

// Numbers of the fields that are not strings (the string fields are in the
// tables below).
const (
	ResourceID       protowire.Number = 1 // ID
	ResourceOwner    protowire.Number = 2 // ID
	ResourceMetadata protowire.Number = 5 // map<string, string>
	ResourceStatus   protowire.Number = 6 // map<string, Status>
	ResourceData     protowire.Number = 7 // google.protobuf.Any
	IDType           protowire.Number = 3 // Type
	IDTenancy        protowire.Number = 4 // Tenancy
	AnyValue         protowire.Number = 2 // bytes
	MapKey           protowire.Number = 1 // of every map entry
	MapValue         protowire.Number = 2 // of every map entry

	StatusConditions  protowire.Number = 2 // repeated Condition
	StatusUpdatedAt   protowire.Number = 3 // google.protobuf.Timestamp
	ConditionState    protowire.Number = 2 // enum State, a varint
	ConditionResource protowire.Number = 5 // Reference
	ReferenceType     protowire.Number = 1 // Type
	ReferenceTenancy  protowire.Number = 2 // Tenancy
	TimestampSeconds  protowire.Number = 1 // int64, a varint
	TimestampNanos    protowire.Number = 2 // int32, a varint

	WatchEventUpsert        protowire.Number = 1 // WatchEvent.Upsert
	WatchEventDelete        protowire.Number = 2 // WatchEvent.Delete
	WatchEventEndOfSnapshot protowire.Number = 3 // WatchEvent.EndOfSnapshot
	WatchEventNewSnapshot   protowire.Number = 4 // WatchEvent.NewSnapshot
	WatchEventBookmark      protowire.Number = 5 // WatchEvent.Bookmark
	WatchEventBatch         protowire.Number = 6 // WatchEvent.Batch
	BatchEvents             protowire.Number = 1 // repeated WatchEvent, of Batch
	EventResource           protowire.Number = 1 // Resource, of Upsert and Delete
	DeleteVersion           protowire.Number = 2 // string, of Delete
	EndOfSnapshotVersion    protowire.Number = 1 // string, of EndOfSnapshot
	BookmarkVersion         protowire.Number = 1 // string, of Bookmark
)

// The string fields of each message, indexed by field number (nil where the
// number is not a string field of the message).

// ResourceStrings returns r's string fields by number.
func ResourceStrings(r *pbresource.Resource) [5]*string {
	return [5]*string{3: &r.Version, 4: &r.Generation}
}

// IDStrings returns id's string fields by number.
func IDStrings(id *pbresource.ID) [3]*string {
	return [3]*string{1: &id.Uid, 2: &id.Name}
}

// TypeStrings returns t's string fields by number.
func TypeStrings(t *pbresource.Type) [4]*string {
	return [4]*string{1: &t.Group, 2: &t.GroupVersion, 3: &t.Kind}
}

// TenancyStrings returns t's string fields by number.
func TenancyStrings(t *pbresource.Tenancy) [3]*string {
	return [3]*string{1: &t.Partition, 2: &t.Namespace}
}

// StatusStrings returns s's string fields by number.
func StatusStrings(s *pbresource.Status) [2]*string {
	return [2]*string{1: &s.ObservedGeneration}
}

// ConditionStrings returns c's string fields by number.
func ConditionStrings(c *pbresource.Condition) [5]*string {
	return [5]*string{1: &c.Type, 3: &c.Reason, 4: &c.Message}
}

// ReferenceStrings returns r's string fields by number.
func ReferenceStrings(r *pbresource.Reference) [5]*string {
	return [5]*string{3: &r.Name, 4: &r.Section}
}

// AnyStrings returns a's string fields by number.
func AnyStrings(a *anypb.Any) [2]*string {
	return [2]*string{1: &a.TypeUrl}
}

// CopyStrings copies every string src points at to where dst's entry of the
// same number points; both come from the same table function.
func CopyStrings(dst, src []*string) {
	for i, p := range src {
		if p != nil {
			*dst[i] = *p
		}
	}
}

// Block holds the fixed-size messages of one resource, so that building a
// resource costs one allocation for all of them. Its messages are used in
// place (Resource.Id pointing at ID.ID, and so on), never copied by value.
// The owner, which most resources lack, is not in it: SetOwner allocates it
// (a Block with one would take the 704-byte size class instead of 448).
type Block struct {
	Resource pbresource.Resource
	ID       IDBlock
	Data     anypb.Any
}

// SharedBlock is a Block for a resource whose ID shares its Type and
// Tenancy with other resources (they are immutable, so sharing is safe); it
// takes the 288-byte size class instead of 448.
type SharedBlock struct {
	Resource pbresource.Resource
	ID       pbresource.ID
	Data     anypb.Any
}

// SetID points the resource's Id at the block's and returns it.
func (b *SharedBlock) SetID() *pbresource.ID {
	b.Resource.Id = &b.ID
	return &b.ID
}

// SetData points the resource's Data at the block's and returns it.
func (b *SharedBlock) SetData() *anypb.Any {
	b.Resource.Data = &b.Data
	return &b.Data
}

// StatusBlock holds a Status with room for one Condition and its
// UpdatedAt, so that a typical status costs one allocation (the 256-byte
// size class).
type StatusBlock struct {
	Status     pbresource.Status
	Condition  pbresource.Condition
	Conditions [1]*pbresource.Condition
	UpdatedAt  timestamppb.Timestamp
}

// AddCondition appends a Condition to the status and returns it: the
// block's first, then new ones.
func (b *StatusBlock) AddCondition() *pbresource.Condition {
	if b.Status.Conditions == nil {
		b.Conditions[0] = &b.Condition
		b.Status.Conditions = b.Conditions[:1:1]
		return &b.Condition
	}
	c := new(pbresource.Condition)
	b.Status.Conditions = append(b.Status.Conditions, c)
	return c
}

// SetUpdatedAt points the status's UpdatedAt at the block's and returns it.
func (b *StatusBlock) SetUpdatedAt() *timestamppb.Timestamp {
	b.Status.UpdatedAt = &b.UpdatedAt
	return &b.UpdatedAt
}

// IDBlock holds an ID with its Type and Tenancy.
type IDBlock struct {
	ID      pbresource.ID
	Type    pbresource.Type
	Tenancy pbresource.Tenancy
}

// SetID points the resource's Id at the block's and returns its IDBlock.
func (b *Block) SetID() *IDBlock {
	b.Resource.Id = &b.ID.ID
	return &b.ID
}

// SetOwner points the resource's Owner at a new IDBlock and returns it.
func (b *Block) SetOwner() *IDBlock {
	o := new(IDBlock)
	b.Resource.Owner = &o.ID
	return o
}

// SetData points the resource's Data at the block's and returns it.
func (b *Block) SetData() *anypb.Any {
	b.Resource.Data = &b.Data
	return &b.Data
}

// SetType points the ID's Type at the block's and returns it.
func (b *IDBlock) SetType() *pbresource.Type {
	b.ID.Type = &b.Type
	return &b.Type
}

// SetTenancy points the ID's Tenancy at the block's and returns it.
func (b *IDBlock) SetTenancy() *pbresource.Tenancy {
	b.ID.Tenancy = &b.Tenancy
	return &b.Tenancy
}

// CopyID makes the block's ID a deep copy of src and returns it.
func (b *IDBlock) CopyID(src *pbresource.ID) *pbresource.ID {
	s := IDStrings(src)
	d := IDStrings(&b.ID)
	CopyStrings(d[:], s[:])
	if t := src.Type; t != nil {
		CopyType(b.SetType(), t)
	}
	if t := src.Tenancy; t != nil {
		CopyTenancy(b.SetTenancy(), t)
	}
	return &b.ID
}

// CopyType sets dst's fields to src's.
func CopyType(dst, src *pbresource.Type) {
	s, d := TypeStrings(src), TypeStrings(dst)
	CopyStrings(d[:], s[:])
}

// CopyTenancy sets dst's fields to src's.
func CopyTenancy(dst, src *pbresource.Tenancy) {
	s, d := TenancyStrings(src), TenancyStrings(dst)
	CopyStrings(d[:], s[:])
}
