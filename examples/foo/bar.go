package foo

import (
	"strings"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Both versions of Bar follow the same two rules:
//
//   - Mutate lower-cases baz, so "Hello World" is stored as "hello world".
//   - Validate rejects an empty baz, naming the field in the error.
//
// The hooks are written once, generic over the version's message; each
// version supplies how to set its baz.

// bazMessage is what both versions of the Bar message have in common.
type bazMessage interface {
	proto.Message
	GetBaz() string
}

// mutateBar returns the Mutate hook of one version of Bar; setBaz stores a
// new baz in that version's message.
func mutateBar[T bazMessage](setBaz func(T, string)) func(*pbresource.Resource) error {
	return func(res *pbresource.Resource) error {
		bar, err := resource.Decode[T](res)
		if err != nil {
			return err
		}
		if lower := strings.ToLower(bar.GetBaz()); lower != bar.GetBaz() {
			setBaz(bar, lower)
			return encode(res, bar)
		}
		return nil
	}
}

// validateBar is the Validate hook of one version of Bar.
func validateBar[T bazMessage](res *pbresource.Resource) error {
	bar, err := resource.Decode[T](res)
	if err != nil {
		return err
	}
	if bar.GetBaz() == "" {
		return resource.ErrInvalidField{Name: "baz", Wrapped: resource.ErrMissing}
	}
	return nil
}

// encode replaces res.Data with msg. Deterministic marshalling keeps equal
// messages byte-for-byte equal, which helps the service spot no-op writes.
func encode(res *pbresource.Resource, msg proto.Message) error {
	data := &anypb.Any{}
	if err := anypb.MarshalFrom(data, msg, proto.MarshalOptions{Deterministic: true}); err != nil {
		return err
	}
	res.Data = data
	return nil
}
