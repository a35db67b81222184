package server

import (
	"hash/maphash"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
)

// Marshalling a watch event once for all the gRPC streams that send it.
//
// A backend hands the same event message to every watch it matches (the
// in-memory one does), and what is sent on a watch is immutable, so N
// WatchList streams over gRPC need not marshal one event N times. WatchList
// marks the events it sends after the snapshot (the ones backends share) in
// the server's cache of encoded events; the gRPC codec that
// Server.ServerOptions installs marshals a marked event the first time any
// stream sends it, keeps the bytes, and hands the same bytes to every other
// stream, without a copy. Every other message, and every event not (or no
// longer) in the cache, goes through gRPC's proto codec as usual.
// Compression, if a stream has any, still happens per stream.
//
// Handlers and stream interceptors see the real event: an interceptor that
// sends another message in its place gets that message marshalled (the
// cache is keyed by the event's address). One that changed an event in
// place would break the rule every receiver relies on, and the streams that
// marshalled it before would have sent the old bytes.

// encodedEventSlots is the size of the cache of marshalled events: enough to
// cover how far apart in a burst of events the streams of one type drift
// (batched streams drift further: each sends up to maxBatchEvents at a
// time). 16,384 slots cost 128 KB, and keep at most as many events and
// their encodings alive (a few MB for small resources; the in-memory
// backend's event log keeps them alive for longer anyway).
const encodedEventSlots = 1 << 14

// encodedEvents is a direct-mapped cache from an event (by pointer) to its
// encoding. An event's slot is chosen by its store version when it has a
// numeric one (a change's: the resource's version for an Upsert, the
// deletion's for a Delete), so that the changes of any window of
// encodedEventSlots consecutive versions never evict each other; else by
// its address. A slot holds the event itself, so while it is cached its
// address cannot be reused by another event. Two streams that mark the
// same event at once may both store an entry; one of them stays, and its
// bytes are marshalled once.
type encodedEvents struct {
	seed  maphash.Seed
	slots [encodedEventSlots]atomic.Pointer[encodedEvent]
	// inUse is set once ServerOptions has handed out the codec: before
	// that no stream reads the cache, and WatchList marks nothing.
	inUse atomic.Bool

	// batches are the batches being sent, with their encodings (see
	// watch_batch.go), for the codec.
	batchMu sync.Mutex
	batches map[*pbresource.WatchEvent]mem.Buffer
}

type encodedEvent struct {
	ev   *pbresource.WatchEvent
	once sync.Once
	buf  mem.Buffer // the event's bytes, once marshalled
	// slice holds buf alone, for the codec to hand every stream: gRPC
	// reads a BufferSlice and frees and references its buffers (a no-op
	// for a SliceBuffer), but never writes to it, so one per event spares
	// an allocation per send.
	slice mem.BufferSlice
	err   error
}

func newEncodedEvents() *encodedEvents {
	return &encodedEvents{seed: maphash.MakeSeed(), batches: make(map[*pbresource.WatchEvent]mem.Buffer)}
}

func (c *encodedEvents) slot(ev *pbresource.WatchEvent) *atomic.Pointer[encodedEvent] {
	if v, ok := eventVersion(ev); ok {
		return &c.slots[v%encodedEventSlots]
	}
	return &c.slots[maphash.Comparable(c.seed, ev)%encodedEventSlots]
}

// eventVersion returns the store version of the change ev reports, if it
// is a decimal number.
func eventVersion(ev *pbresource.WatchEvent) (uint64, bool) {
	var v string
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		v = e.Upsert.GetResource().GetVersion()
	case *pbresource.WatchEvent_Delete_:
		if v = e.Delete.GetVersion(); v == "" {
			v = e.Delete.GetResource().GetVersion()
		}
	}
	if v == "" || len(v) > 19 {
		return 0, false // (19 digits never overflow)
	}
	var n uint64
	for i := 0; i < len(v); i++ {
		d := v[i] - '0'
		if d > 9 {
			return 0, false
		}
		n = n*10 + uint64(d)
	}
	return n, true
}

// mark puts ev in the cache, unless it is there already.
func (c *encodedEvents) mark(ev *pbresource.WatchEvent) {
	slot := c.slot(ev)
	if e := slot.Load(); e != nil && e.ev == ev {
		return
	}
	slot.Store(&encodedEvent{ev: ev})
}

// encoded returns ev's bytes, marshalled once for every stream that sends
// it, as a BufferSlice shared by them all, if ev is in the cache; ok is
// false if it is not.
func (c *encodedEvents) encoded(ev *pbresource.WatchEvent) (data mem.BufferSlice, ok bool, err error) {
	e := c.slot(ev).Load()
	if e == nil || e.ev != ev {
		return nil, false, nil
	}
	if _, err = e.encoded(); err != nil {
		return nil, true, err
	}
	return e.slice, true, nil
}

// encoded returns e's event marshalled, the first call marshalling it.
func (e *encodedEvent) encoded() (mem.Buffer, error) {
	e.once.Do(func() {
		b, err := proto.Marshal(e.ev)
		e.buf, e.err = mem.SliceBuffer(b), err
		e.slice = mem.BufferSlice{e.buf}
	})
	return e.buf, e.err
}

// encode returns ev's bytes, marshalled once for every stream that sends
// it: it puts ev in the cache, unless it is there already, and returns its
// encoding.
func (c *encodedEvents) encode(ev *pbresource.WatchEvent) (mem.Buffer, error) {
	slot := c.slot(ev)
	e := slot.Load()
	if e == nil || e.ev != ev {
		e = &encodedEvent{ev: ev}
		slot.Store(e)
	}
	return e.encoded()
}

// putBatch records batch's encoding buf for the codec to send as it is,
// until dropBatch. buf is never written to afterwards.
func (c *encodedEvents) putBatch(batch *pbresource.WatchEvent, buf mem.Buffer) {
	c.batchMu.Lock()
	c.batches[batch] = buf
	c.batchMu.Unlock()
}

// dropBatch forgets batch's encoding.
func (c *encodedEvents) dropBatch(batch *pbresource.WatchEvent) {
	c.batchMu.Lock()
	delete(c.batches, batch)
	c.batchMu.Unlock()
}

// encodedBatch returns batch's encoding, if putBatch recorded it.
func (c *encodedEvents) encodedBatch(batch *pbresource.WatchEvent) (mem.Buffer, bool) {
	c.batchMu.Lock()
	buf, ok := c.batches[batch]
	c.batchMu.Unlock()
	return buf, ok
}

// eventCodec is the gRPC codec of ServerOptions: gRPC's proto codec, except
// that it marshals a watch event in the server's cache once for all streams.
type eventCodec struct {
	proto  encoding.CodecV2
	events *encodedEvents
}

func (c *eventCodec) Marshal(v any) (mem.BufferSlice, error) {
	if ev, ok := v.(*pbresource.WatchEvent); ok {
		if _, ok := ev.Event.(*pbresource.WatchEvent_Batch_); ok {
			if buf, ok := c.events.encodedBatch(ev); ok {
				return mem.BufferSlice{buf}, nil
			}
			return c.proto.Marshal(v)
		}
		// The buffer is never written to, and freeing a SliceBuffer does
		// nothing, so every stream may hold it at once.
		if data, ok, err := c.events.encoded(ev); ok {
			return data, err
		}
	}
	return c.proto.Marshal(v)
}

func (c *eventCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.proto.Unmarshal(data, v) }

// Name is the proto codec's: the codec reads and writes nothing else.
func (c *eventCodec) Name() string { return c.proto.Name() }

// ServerOptions returns the options a host passes to grpc.NewServer for the
// grpc.Server it registers s on. Today that is one: a codec (set with
// grpc.ForceServerCodecV2) that marshals each watch event once for all the
// WatchList streams that send it, instead of once per stream. Without the
// options the service works the same, at a higher CPU cost per watch event.
//
// The codec speaks protobuf to every client of that grpc.Server, for every
// service on it: it takes the place of gRPC's choice of codec by the
// request's content-subtype. That changes nothing unless the host registered
// other codecs (encoding.RegisterCodecV2) for clients that ask for them; such
// a host should leave the options out. Options given later to
// grpc.NewServer override these, e.g. another ForceServerCodec.
func (s *Server) ServerOptions() []grpc.ServerOption {
	s.encoded.inUse.Store(true)
	return []grpc.ServerOption{grpc.ForceServerCodecV2(&eventCodec{
		proto:  encoding.GetCodecV2(encproto.Name),
		events: s.encoded,
	})}
}

// marksEvents reports whether WatchList should mark the events it sends on
// stream for the codec: the codec was handed out and stream is not an
// in-process one (which hands over the events themselves and marshals
// nothing). A gRPC stream that interceptors wrap is marked too: its events
// still reach the codec.
func (s *Server) marksEvents(stream grpc.ServerStreamingServer[pbresource.WatchEvent]) bool {
	return s.encoded.inUse.Load() && !inProcess(stream)
}

// inProcess reports whether stream is the server side of an in-process
// client's WatchList.
func inProcess(stream grpc.ServerStreamingServer[pbresource.WatchEvent]) bool {
	_, ok := stream.(*inprocWatchServer)
	return ok
}
