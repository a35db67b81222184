package resource

import (
	"fmt"
	"strings"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
)

// EqualType reports whether a and b are the same type, GroupVersion included.
func EqualType(a, b *pbresource.Type) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.Group == b.Group && a.GroupVersion == b.GroupVersion && a.Kind == b.Kind
}

// EqualUnversionedType reports whether a and b have the same Group and Kind,
// whatever their GroupVersion: such types share one stored resource.
func EqualUnversionedType(a, b *pbresource.Type) bool {
	return a.GetGroup() == b.GetGroup() && a.GetKind() == b.GetKind()
}

// EqualTenancy reports whether a and b name the same tenancy units. A nil
// tenancy equals an empty one.
func EqualTenancy(a, b *pbresource.Tenancy) bool {
	return a.GetPartition() == b.GetPartition() && a.GetNamespace() == b.GetNamespace()
}

// EqualID reports whether a and b are the same ID, Uid included.
func EqualID(a, b *pbresource.ID) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.Uid == b.Uid && a.Name == b.Name && EqualType(a.Type, b.Type) && EqualTenancy(a.Tenancy, b.Tenancy)
}

// EqualReference reports whether a and b point at the same resource section.
func EqualReference(a, b *pbresource.Reference) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.Name == b.Name && a.Section == b.Section && EqualType(a.Type, b.Type) && EqualTenancy(a.Tenancy, b.Tenancy)
}

// ReferenceOrID is anything that names a resource by type, tenancy and name:
// *pbresource.ID and *pbresource.Reference both are.
type ReferenceOrID interface {
	GetType() *pbresource.Type
	GetTenancy() *pbresource.Tenancy
	GetName() string
}

// EqualReferenceOrID reports whether a and b name the same resource, ignoring
// Uids and sections.
func EqualReferenceOrID(a, b ReferenceOrID) bool {
	return a.GetName() == b.GetName() && EqualType(a.GetType(), b.GetType()) && EqualTenancy(a.GetTenancy(), b.GetTenancy())
}

// Reference returns a Reference to the resource named by id, optionally to a
// section of it.
func Reference(id ReferenceOrID, section string) *pbresource.Reference {
	return &pbresource.Reference{
		Type:    cloneType(id.GetType()),
		Tenancy: cloneTenancy(id.GetTenancy()),
		Name:    id.GetName(),
		Section: section,
	}
}

// IDFromReference returns an ID (without Uid) naming the same resource as ref.
func IDFromReference(ref ReferenceOrID) *pbresource.ID {
	return &pbresource.ID{
		Type:    cloneType(ref.GetType()),
		Tenancy: cloneTenancy(ref.GetTenancy()),
		Name:    ref.GetName(),
	}
}

func cloneType(t *pbresource.Type) *pbresource.Type {
	if t == nil {
		return nil
	}
	out := new(pbresource.Type)
	pblayout.CopyType(out, t)
	return out
}

func cloneTenancy(t *pbresource.Tenancy) *pbresource.Tenancy {
	if t == nil {
		return nil
	}
	out := new(pbresource.Tenancy)
	pblayout.CopyTenancy(out, t)
	return out
}

// TypeString renders t as "group.version.kind", e.g. "foo.v1.Bar".
func TypeString(t *pbresource.Type) string {
	return t.GetGroup() + "." + t.GetGroupVersion() + "." + t.GetKind()
}

// NameKey identifies a resource within its type: its tenancy and name,
// without its Uid, so the lifetimes of a name share it. It is comparable, a
// map key; keys order by partition, then namespace, then name (List's
// order).
type NameKey struct {
	Partition, Namespace, Name string
}

// NameKeyOf returns the NameKey of id.
func NameKeyOf(id *pbresource.ID) NameKey {
	ten := id.GetTenancy()
	return NameKey{Partition: ten.GetPartition(), Namespace: ten.GetNamespace(), Name: id.GetName()}
}

// String renders the key as "partition/namespace/name".
func (k NameKey) String() string { return k.Partition + "/" + k.Namespace + "/" + k.Name }

// UnversionedType is a resource type without its GroupVersion: all
// versions of a type name the same stored resources, the same cached ones
// and the same work of a controller. It is comparable, a map key.
type UnversionedType struct {
	Group string
	Kind  string
}

// UnversionedTypeFrom drops the GroupVersion of t.
func UnversionedTypeFrom(t *pbresource.Type) UnversionedType {
	return UnversionedType{Group: t.GetGroup(), Kind: t.GetKind()}
}

// String renders the type as "group.kind".
func (t UnversionedType) String() string { return t.Group + "." + t.Kind }

// UnversionedTypeString renders t as "group.kind", without its GroupVersion:
// UnversionedTypeFrom(t).String().
func UnversionedTypeString(t *pbresource.Type) string {
	return t.GetGroup() + "." + t.GetKind()
}

// ParseType parses the "group.version.kind" form produced by TypeString.
func ParseType(s string) (*pbresource.Type, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return nil, fmt.Errorf("type %s is not of the form group.version.kind", Quote(s))
	}
	t := &pbresource.Type{Group: parts[0], GroupVersion: parts[1], Kind: parts[2]}
	if err := ValidateType(t); err != nil {
		return nil, err
	}
	return t, nil
}

// TenancyString renders t as "partition.namespace"; empty units stay empty.
func TenancyString(t *pbresource.Tenancy) string {
	return t.GetPartition() + "." + t.GetNamespace()
}

// IDString renders id as "group.version.kind/partition.namespace/name", with
// "@uid" appended when the Uid is set. It is meant for logs and messages.
func IDString(id *pbresource.ID) string {
	s := TypeString(id.GetType()) + "/" + TenancyString(id.GetTenancy()) + "/" + id.GetName()
	if id.GetUid() != "" {
		s += "@" + id.GetUid()
	}
	return s
}

// ReferenceString renders a Reference or ID like IDString, without a Uid.
func ReferenceString(r ReferenceOrID) string {
	return TypeString(r.GetType()) + "/" + TenancyString(r.GetTenancy()) + "/" + r.GetName()
}

// EqualStatus reports whether a and b say the same thing: the same observed
// generation and the same conditions in the same order. UpdatedAt is ignored,
// so a controller can compare a freshly built status with the stored one and
// skip a write that would change nothing but the time.
func EqualStatus(a, b *pbresource.Status) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	if a.ObservedGeneration != b.ObservedGeneration || len(a.Conditions) != len(b.Conditions) {
		return false
	}
	for i := range a.Conditions {
		if !EqualCondition(a.Conditions[i], b.Conditions[i]) {
			return false
		}
	}
	return true
}

// EqualCondition reports whether two conditions are identical.
func EqualCondition(a, b *pbresource.Condition) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	return a.Type == b.Type && a.State == b.State && a.Reason == b.Reason &&
		a.Message == b.Message && EqualReference(a.Resource, b.Resource)
}

// EqualStatusMap reports whether two status maps hold equal statuses (see
// EqualStatus) under the same keys.
func EqualStatusMap(a, b map[string]*pbresource.Status) bool {
	if len(a) != len(b) {
		return false
	}
	for k, av := range a {
		bv, ok := b[k]
		if !ok || !EqualStatus(av, bv) {
			return false
		}
	}
	return true
}

// TypeV1Tombstone is the type of the Tombstone resources the service writes
// when a resource that owns others is deleted; the reaper controller deletes
// the owned resources and then the tombstone.
var TypeV1Tombstone = &pbresource.Type{Group: "resource", GroupVersion: "v1", Kind: "Tombstone"}
