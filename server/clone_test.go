package server

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// fill sets every field of m, recursively, to a value derived from seed, so
// that a copy that forgets a field (e.g. one added to resource.proto later)
// is caught by proto.Equal.
func fill(m protoreflect.Message, seed int, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for j := range 2 {
				if fd.Message() != nil {
					e := l.NewElement()
					fill(e.Message(), seed+j, depth+1)
					l.Append(e)
				} else {
					l.Append(scalar(fd, seed+j))
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for j := range 2 {
				k := scalar(fd.MapKey(), seed+j).MapKey()
				if fd.MapValue().Message() != nil {
					v := mp.NewValue()
					fill(v.Message(), seed+j, depth+1)
					mp.Set(k, v)
				} else {
					mp.Set(k, scalar(fd.MapValue(), seed+j))
				}
			}
		case fd.Message() != nil:
			if depth < 6 {
				fill(m.Mutable(fd).Message(), seed, depth+1)
			}
		default:
			m.Set(fd, scalar(fd, seed))
		}
	}
}

func scalar(fd protoreflect.FieldDescriptor, seed int) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("%s-%d", fd.Name(), seed))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte{byte(seed), 1, 2})
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(protoreflect.EnumNumber(1 + seed%2))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(7 + seed))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(7 + seed))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(7 + seed))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(7 + seed))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(seed) + 0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(float64(seed) + 0.5)
	}
	panic(fmt.Sprintf("unhandled kind %v", fd.Kind()))
}

func TestClones(t *testing.T) {
	cases := map[string]struct {
		msg   proto.Message
		clone func(proto.Message) proto.Message
	}{
		"ListResponse": {&pbresource.ListResponse{}, func(m proto.Message) proto.Message {
			return cloneListResponse(m.(*pbresource.ListResponse))
		}},
		"ReadResponse": {&pbresource.ReadResponse{}, func(m proto.Message) proto.Message {
			return &pbresource.ReadResponse{Resource: resource.Clone(m.(*pbresource.ReadResponse).Resource)}
		}},
		// Responses holding one Resource are all alike; WriteStatus's has
		// the same shape as Read's.
		"ListByOwnerResponse": {&pbresource.ListByOwnerResponse{}, func(m proto.Message) proto.Message {
			return cloneListByOwnerResponse(m.(*pbresource.ListByOwnerResponse))
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := tc.msg
			fill(m.ProtoReflect(), 0, 0)
			c := tc.clone(m)
			require.True(t, proto.Equal(m, c), "copy differs: a field is missing from the hand-written clone\n%v\n%v", m, c)

			// No sharing: changing the original leaves the copy alone.
			snapshot := proto.Clone(c)
			fill(m.ProtoReflect(), 5, 0)
			require.True(t, proto.Equal(snapshot, c))
		})
	}
	// Responses that only wrap a resource must keep having one field, or
	// inproc.go needs updating.
	for _, m := range []proto.Message{&pbresource.WriteResponse{}, &pbresource.WriteStatusResponse{}, &pbresource.MutateAndValidateResponse{}, &pbresource.ReadResponse{}} {
		require.Equal(t, 1, m.ProtoReflect().Descriptor().Fields().Len(), "%T", m)
	}
	require.Equal(t, 0, (&pbresource.DeleteResponse{}).ProtoReflect().Descriptor().Fields().Len())
}
