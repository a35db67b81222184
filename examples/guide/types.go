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
	err := r.Register(resource.Registration{
		Type:     BarType,
		Proto:    &pbfoov1.Bar{},
		Scope:    resource.ScopeNamespace,
		Mutate:   mutateBar,
		Validate: validateBar,
		ACLs: &resource.ACLHooks{
			Write: authorizeBarWrite,
		},
	})
	if err != nil {
		return err
	}
	return r.Register(resource.Registration{
		Type:  ZipType,
		Proto: &pbfoov1.Zip{},
		Scope: resource.ScopePartition,
	})
}

// mutateBar normalises input before it is validated and stored.
func mutateBar(res *pbresource.Resource) error {
	bar, err := resource.Decode[*pbfoov1.Bar](res)
	if err != nil {
		return err
	}
	bar.Baz = strings.ToLower(bar.Baz)
	return res.Data.MarshalFrom(bar)
}

// validateBar rejects what is malformed, naming the field.
func validateBar(res *pbresource.Resource) error {
	bar, err := resource.Decode[*pbfoov1.Bar](res)
	if err != nil {
		return err
	}
	if bar.Baz == "" {
		return resource.ErrInvalidField{Name: "baz", Wrapped: resource.ErrMissing}
	}
	return nil
}

// authorizeBarWrite lets only callers with write access to the namespace
// write Bars named "admin-*".
func authorizeBarWrite(authz resource.Authorizer, res *pbresource.Resource) error {
	if strings.HasPrefix(res.Id.Name, "admin-") && !authz.Allowed(resource.AccessWrite, res.Id) {
		return resource.ErrPermissionDenied
	}
	return nil
}
