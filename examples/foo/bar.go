package foo

import (
	"strings"

	"github.com/loomrt/loom/resource"
	"google.golang.org/protobuf/proto"
)

// Both versions of Bar follow the same two rules:
//
//   - Mutate lower-cases baz, so "Hello World" is stored as "hello world".
//   - Validate rejects an empty baz, naming the field in the error.
//
// The hooks are written once, generic over the version's message; each
// version supplies how to set its baz. They get the data decoded and change
// it in place: the server encodes it again only if it changed.

// bazMessage is what both versions of the Bar message have in common.
type bazMessage interface {
	proto.Message
	GetBaz() string
}

// mutateBar returns the Mutate hook of one version of Bar; setBaz stores a
// new baz in that version's message.
func mutateBar[T bazMessage](setBaz func(T, string)) func(*resource.Decoded[T]) error {
	return func(res *resource.Decoded[T]) error {
		setBaz(res.Data, strings.ToLower(res.Data.GetBaz()))
		return nil
	}
}

// validateBar is the Validate hook of one version of Bar.
func validateBar[T bazMessage](res *resource.Decoded[T]) error {
	if res.Data.GetBaz() == "" {
		return resource.ErrInvalidField{Name: "baz", Wrapped: resource.ErrMissing}
	}
	return nil
}
