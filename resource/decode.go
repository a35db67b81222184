package resource

import (
	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/protobuf/proto"
)

// Decode unmarshals res.Data into a new message of type T. A nil Data or
// one holding another message type is an ErrDataParse.
func Decode[T proto.Message](res *pbresource.Resource) (T, error) {
	var zero T
	msg := zero.ProtoReflect().New().Interface().(T)
	if res.GetData() == nil {
		return zero, ErrDataParse{TypeName: string(msg.ProtoReflect().Descriptor().FullName()), Wrapped: ErrMissing}
	}
	if err := res.Data.UnmarshalTo(msg); err != nil {
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
