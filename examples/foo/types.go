package foo

import (
	"errors"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// GroupName is the resource group every example type belongs to.
const GroupName = "foo"

// The example resource types. Treat them as read-only.
var (
	// BarV1Type is foo.v1.Bar; its data is a pbfoov1.Bar.
	BarV1Type = &pbresource.Type{Group: GroupName, GroupVersion: "v1", Kind: "Bar"}

	// BarV2Type is foo.v2.Bar, a second schema of the same stored kind; its
	// data is a pbfoov2.Bar.
	BarV2Type = &pbresource.Type{Group: GroupName, GroupVersion: "v2", Kind: "Bar"}

	// ZipType is foo.v1.Zip; its data is a pbfoov1.Zip.
	ZipType = &pbresource.Type{Group: GroupName, GroupVersion: "v1", Kind: "Zip"}

	// QuxType is foo.v1.Qux; its data is a pbfoov1.Qux.
	QuxType = &pbresource.Type{Group: GroupName, GroupVersion: "v1", Kind: "Qux"}
)

// RegisterTypes adds every example type to r. Like resource.Register, it
// returns an error if a type cannot be registered (one is already
// registered, say); it tries every type and joins their errors.
func RegisterTypes(r resource.Registry) error {
	return errors.Join(
		resource.Register(r, resource.Registration[*pbfoov1.Bar]{
			Type:     BarV1Type,
			Scope:    resource.ScopeNamespace,
			Mutate:   mutateBar(func(b *pbfoov1.Bar, baz string) { b.Baz = baz }),
			Validate: validateBar[*pbfoov1.Bar],
		}),
		resource.Register(r, resource.Registration[*pbfoov2.Bar]{
			Type:     BarV2Type,
			Scope:    resource.ScopeNamespace,
			Mutate:   mutateBar(func(b *pbfoov2.Bar, baz string) { b.Baz = baz }),
			Validate: validateBar[*pbfoov2.Bar],
		}),
		resource.Register(r, resource.Registration[*pbfoov1.Zip]{
			Type:  ZipType,
			Scope: resource.ScopePartition,
		}),
		resource.Register(r, resource.Registration[*pbfoov1.Qux]{
			Type:  QuxType,
			Scope: resource.ScopeCluster,
		}),
	)
}
