// Package greeting is the example host's own resource type, its hooks and
// its controller: what a controller author writes, beside the few lines of
// main that hand them to the host.
//
//	type               data message                     scope      hooks
//	hello.v1.Greeting  loom.example.hello.v1.Greeting   namespace  Mutate + Validate
//
// The greeter controller answers every Greeting with a status saying hello.
package greeting

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	pbhellov1 "github.com/loomrt/loom/examples/hello/pbhello/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// GroupName is the resource group of the example's types.
const GroupName = "hello"

// MaxNameLength is the longest name a Greeting may greet, in characters.
const MaxNameLength = 64

// Type is hello.v1.Greeting; its data is a pbhellov1.Greeting. Treat it as
// read-only.
var Type = &pbresource.Type{Group: GroupName, GroupVersion: "v1", Kind: "Greeting"}

// RegisterTypes adds the example's types to r.
func RegisterTypes(r resource.Registry) error {
	return resource.Register(r, resource.Registration[*pbhellov1.Greeting]{
		Type:     Type,
		Scope:    resource.ScopeNamespace,
		Mutate:   mutate,
		Validate: validate,
	})
}

// mutate trims the name to greet, defaults it to the resource's name, and
// fills in the type of reply_to.
func mutate(res *resource.Decoded[*pbhellov1.Greeting]) error {
	g := res.Data
	g.Name = strings.TrimSpace(g.Name)
	if g.Name == "" {
		g.Name = res.Resource.GetId().GetName()
	}
	if g.ReplyTo != nil && g.ReplyTo.Type == nil {
		g.ReplyTo.Type = &pbresource.Type{Group: Type.Group, GroupVersion: Type.GroupVersion, Kind: Type.Kind}
	}
	return nil
}

// validate checks the name's length and that reply_to, if set, names a
// Greeting in the same namespace.
func validate(res *resource.Decoded[*pbhellov1.Greeting]) error {
	g := res.Data
	if n := utf8.RuneCountInString(g.Name); n > MaxNameLength {
		return resource.ErrInvalidField{Name: "name", Wrapped: fmt.Errorf("%d characters, more than %d", n, MaxNameLength)}
	}
	if r := g.ReplyTo; r != nil {
		switch {
		case r.Name == "":
			return resource.ErrInvalidField{Name: "reply_to", Wrapped: resource.ErrInvalidField{Name: "name", Wrapped: resource.ErrMissing}}
		case !resource.EqualType(r.Type, Type):
			return resource.ErrInvalidField{Name: "reply_to", Wrapped: errors.New("must name a hello.v1.Greeting")}
		case r.Tenancy != nil:
			return resource.ErrInvalidField{Name: "reply_to", Wrapped: errors.New("leave the tenancy out: a greeting replies within its namespace")}
		}
	}
	return nil
}
