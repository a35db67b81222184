package server

import (
	"context"
	"hash/maphash"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
)

// Marshalling an event once for all the gRPC streams that send it.
//
// A backend hands the same event message to every watch it matches (the
// in-memory one does), so N WatchList streams over gRPC would marshal one
// event N times. Instead, the first stream to send an event marshals it and
// keeps the bytes, in a stand-in WatchEvent that holds them as its unknown
// fields; the other streams send the stand-in. The proto codec writes
// unknown fields out as they are, so the stand-in marshals to exactly the
// event's bytes for the cost of a copy; compression, if the stream has any,
// still happens per stream as usual.
//
// Only streams that gRPC serves with the proto codec get stand-ins (see
// sharesEncoding): the in-process client copies events field by field and
// would lose the unknown fields, and a codec other than proto would not
// write them out. A server forced onto a non-proto codec with
// grpc.ForceServerCodec cannot be detected; it is not a configuration the
// ResourceService supports. Stream interceptors that read the messages a
// handler sends see a WatchEvent with only unknown fields.

// encodedEventSlots is the size of the cache of marshalled events: enough to
// cover how far apart in a burst of events the streams of one type drift.
const encodedEventSlots = 4096

// encodedEvents is a direct-mapped cache from an event (by pointer) to its
// stand-in. A slot holds the event itself, so while it is cached its
// address cannot be reused by another event. Two streams that miss on the
// same event at once both marshal it, and one of the results stays.
type encodedEvents struct {
	seed  maphash.Seed
	slots [encodedEventSlots]atomic.Pointer[encodedEvent]
}

type encodedEvent struct {
	ev       *pbresource.WatchEvent
	standIn  *pbresource.WatchEvent
	encodErr error
}

func newEncodedEvents() *encodedEvents {
	return &encodedEvents{seed: maphash.MakeSeed()}
}

// standIn returns the message to send in place of ev: one that marshals to
// the same bytes, marshalled only once for every stream that sends ev.
func (c *encodedEvents) standIn(ev *pbresource.WatchEvent) (*pbresource.WatchEvent, error) {
	slot := &c.slots[maphash.Comparable(c.seed, ev)%encodedEventSlots]
	if e := slot.Load(); e != nil && e.ev == ev {
		return e.standIn, e.encodErr
	}
	e := &encodedEvent{ev: ev}
	if b, err := proto.Marshal(ev); err != nil {
		e.encodErr = err
	} else {
		e.standIn = &pbresource.WatchEvent{}
		e.standIn.ProtoReflect().SetUnknown(b)
	}
	slot.Store(e)
	return e.standIn, e.encodErr
}

// sharesEncoding reports whether stream is a gRPC server stream whose
// messages the proto codec marshals: its content type is application/grpc,
// or has the subtype proto (application/grpc+proto, application/grpc;proto).
func sharesEncoding(ctx context.Context, stream grpc.ServerStreamingServer[pbresource.WatchEvent]) bool {
	if _, ok := stream.(*grpc.GenericServerStream[pbresource.WatchListRequest, pbresource.WatchEvent]); !ok {
		return false
	}
	types := metadata.ValueFromIncomingContext(ctx, "content-type")
	if len(types) != 1 {
		return false
	}
	const base = "application/grpc"
	ct := types[0]
	if len(ct) < len(base) || !strings.EqualFold(ct[:len(base)], base) {
		return false
	}
	switch rest := ct[len(base):]; {
	case rest == "":
		return true
	case rest[0] == '+' || rest[0] == ';':
		return strings.EqualFold(rest[1:], "proto")
	}
	return false
}
