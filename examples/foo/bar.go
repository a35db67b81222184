package foo

import (
	"strings"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
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
// The hooks are written once per version because each version decodes its
// data into its own message.

func mutateBarV1(res *pbresource.Resource) error {
	bar, err := decode[pbfoov1.Bar](res)
	if err != nil {
		return err
	}
	if lower := strings.ToLower(bar.Baz); lower != bar.Baz {
		bar.Baz = lower
		return encode(res, bar)
	}
	return nil
}

func validateBarV1(res *pbresource.Resource) error {
	bar, err := decode[pbfoov1.Bar](res)
	if err != nil {
		return err
	}
	return validateBaz(bar.Baz)
}

func mutateBarV2(res *pbresource.Resource) error {
	bar, err := decode[pbfoov2.Bar](res)
	if err != nil {
		return err
	}
	if lower := strings.ToLower(bar.Baz); lower != bar.Baz {
		bar.Baz = lower
		return encode(res, bar)
	}
	return nil
}

func validateBarV2(res *pbresource.Resource) error {
	bar, err := decode[pbfoov2.Bar](res)
	if err != nil {
		return err
	}
	return validateBaz(bar.Baz)
}

func validateBaz(baz string) error {
	if baz == "" {
		return resource.ErrInvalidField{Name: "baz", Wrapped: resource.ErrMissing}
	}
	return nil
}

// decode unpacks res.Data into a new T, reporting a failure as
// resource.ErrDataParse so the service answers InvalidArgument.
func decode[T any, PT interface {
	*T
	proto.Message
}](res *pbresource.Resource) (PT, error) {
	msg := PT(new(T))
	if err := res.GetData().UnmarshalTo(msg); err != nil {
		return nil, resource.NewErrDataParse(msg, err)
	}
	return msg, nil
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
