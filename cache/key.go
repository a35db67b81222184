package cache

import (
	"strings"

	"github.com/loomrt/loom/resource"
)

// Key returns the index key of the resource named by ref: its group, kind,
// partition, namespace and name, joined so that no two resources share a key.
// The GroupVersion is left out: all versions of a type name one resource.
func Key(ref resource.ReferenceOrID) string {
	t, ten := ref.GetType(), ref.GetTenancy()
	var b strings.Builder
	b.Grow(len(t.GetGroup()) + len(t.GetKind()) + len(ten.GetPartition()) + len(ten.GetNamespace()) + len(ref.GetName()) + 5)
	b.WriteString(t.GetGroup())
	b.WriteByte('.')
	b.WriteString(t.GetKind())
	b.WriteByte('/')
	b.WriteString(ten.GetPartition())
	b.WriteByte('/')
	b.WriteString(ten.GetNamespace())
	b.WriteByte('/')
	b.WriteString(ref.GetName())
	return b.String()
}

// TenancyKey returns the index key of a tenancy: "partition/namespace". It
// is a prefix of the Key of every resource in that tenancy after the type.
func TenancyKey(ten interface {
	GetPartition() string
	GetNamespace() string
}) string {
	return ten.GetPartition() + "/" + ten.GetNamespace()
}
