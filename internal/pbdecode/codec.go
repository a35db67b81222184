package pbdecode

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"

	"github.com/loomrt/loom/proto/pbresource"
)

// Codec is a gRPC codec for one WatchList call: it decodes the WatchEvents
// it receives with a Decoder and everything else as gRPC's proto codec.
// Use it with grpc.ForceCodecV2; its name is gRPC's proto codec's, so the
// server sees an ordinary protobuf call.
type Codec struct {
	d Decoder
}

var _ encoding.CodecV2 = (*Codec)(nil)

// NewCodec returns a Codec for one stream's events.
func NewCodec() *Codec {
	return new(Codec)
}

// protoCodec is gRPC's own proto codec.
var protoCodec = encoding.GetCodecV2(proto.Name)

// Marshal encodes v as gRPC's proto codec does.
func (c *Codec) Marshal(v any) (mem.BufferSlice, error) {
	return protoCodec.Marshal(v)
}

// Unmarshal decodes data into v, compactly if v is a WatchEvent (or a
// Batch of them).
func (c *Codec) Unmarshal(data mem.BufferSlice, v any) error {
	ev, ok := v.(*pbresource.WatchEvent)
	if !ok {
		return protoCodec.Unmarshal(data, v)
	}
	// The decoder keeps nothing of the bytes, so they can go back to the
	// pool.
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return c.d.WatchMessage(buf.ReadOnlyData(), ev)
}

// Name is gRPC's proto codec's name.
func (c *Codec) Name() string {
	return proto.Name
}
