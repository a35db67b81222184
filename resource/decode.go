package resource

import (
	"reflect"

	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/proto"
)

// Decode unmarshals res.Data into a new message of type T. A nil Data or
// one holding another message type is an ErrDataParse.
func Decode[T proto.Message](res *pbresource.Resource) (T, error) {
	msg := newMessage[T]()
	if err := decodeInto(res, msg); err != nil {
		var zero T
		return zero, err
	}
	return msg, nil
}

// decodeInto unmarshals res.Data into msg, a new, empty message: an
// ErrDataParse when Data is nil, holds another message type or does not
// parse.
func decodeInto(res *pbresource.Resource, msg proto.Message) error {
	if res.GetData() == nil {
		return ErrDataParse{TypeName: string(msg.ProtoReflect().Descriptor().FullName()), Wrapped: ErrMissing}
	}
	// res.Data.UnmarshalTo(msg) without its Reset of msg, which is new:
	// merging into an empty message is unmarshalling it. A Data of another
	// type goes through UnmarshalTo for its error.
	if !res.Data.MessageIs(msg) {
		return NewErrDataParse(msg, res.Data.UnmarshalTo(msg))
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(res.Data.GetValue(), msg); err != nil {
		return NewErrDataParse(msg, err)
	}
	return nil
}

// DecodeResource returns res with its Data decoded as T (see Decode). The
// result points at res; the decoded message is new.
func DecodeResource[T proto.Message](res *pbresource.Resource) (*Decoded[T], error) {
	data, err := Decode[T](res)
	if err != nil {
		return nil, err
	}
	return &Decoded[T]{Resource: res, Data: data}, nil
}

// newMessage returns a new, empty T. A generated message type is a pointer
// to a struct whose zero value is the empty message, which is what
// T.ProtoReflect().New() makes too, by reflection, after a detour through a
// wrapper around the nil T (the slow path of protobuf's message reflection);
// a T of another shape takes that way.
func newMessage[T proto.Message]() T {
	if t := reflect.TypeFor[T](); t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		return reflect.New(t.Elem()).Interface().(T)
	}
	var zero T
	return zero.ProtoReflect().New().Interface().(T)
}
