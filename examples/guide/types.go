package guide

import (
	"strings"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// BarType names the example type.
var BarType = &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Bar"}

// RegisterTypes registers the guide's types.
func RegisterTypes(r resource.Registry) error {
	err := resource.Register(r, resource.Registration[*pbfoov1.Bar]{
		Type:     BarType,
		Scope:    resource.ScopeNamespace,
		Mutate:   mutateBar,
		Validate: validateBar,
		ACLs: &resource.ACLHooks[*pbfoov1.Bar]{
			Write: authorizeBarWrite,
		},
	})
	if err != nil {
		return err
	}
	return resource.Register(r, resource.Registration[*pbfoov1.Zip]{
		Type:  ZipType,
		Scope: resource.ScopePartition,
	})
}

// mutateBar normalises input before it is validated and stored.
func mutateBar(res *resource.Decoded[*pbfoov1.Bar]) error {
	res.Data.Baz = strings.ToLower(res.Data.Baz)
	return nil
}

// validateBar rejects what is malformed, naming the field.
func validateBar(res *resource.Decoded[*pbfoov1.Bar]) error {
	if res.Data.Baz == "" {
		return resource.ErrInvalidField{Name: "baz", Wrapped: resource.ErrMissing}
	}
	return nil
}

// authorizeBarWrite lets only callers with write access to the namespace
// write Bars named "admin-*".
func authorizeBarWrite(authz resource.Authorizer, res *resource.Decoded[*pbfoov1.Bar]) error {
	id := res.Resource.Id
	if strings.HasPrefix(id.Name, "admin-") && !authz.Allowed(resource.AccessWrite, id) {
		return resource.ErrPermissionDenied
	}
	return nil
}
