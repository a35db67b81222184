package resource

import (
	"reflect"

	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/proto"
)

// Decode unmarshals res.Data into a new message of type T. A nil Data or
// one holding another message type is an ErrDataParse.
func Decode[T proto.Message](res *pbresource.Resource) (T, error) {
	var zero T
	msg := newMessage[T]()
	if res.GetData() == nil {
		return zero, ErrDataParse{TypeName: string(msg.ProtoReflect().Descriptor().FullName()), Wrapped: ErrMissing}
	}
	// res.Data.UnmarshalTo(msg) without its Reset of msg, which is new:
	// merging into an empty message is unmarshalling it. A Data of another
	// type goes through UnmarshalTo for its error.
	if !res.Data.MessageIs(msg) {
		return zero, NewErrDataParse(msg, res.Data.UnmarshalTo(msg))
	}
	if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(res.Data.GetValue(), msg); err != nil {
		return zero, NewErrDataParse(msg, err)
	}
	return msg, nil
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
