package server

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	encproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/proto/pbresource"
)

func testEvent(name string) *pbresource.WatchEvent {
	res := &pbresource.Resource{
		Id: &pbresource.ID{
			Type:    &pbresource.Type{Group: "demo", GroupVersion: "v1", Kind: "Widget"},
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
			Name:    name,
			Uid:     "01HZZZZZZZZZZZZZZZZZZZZZZZ",
		},
		Version:    "7",
		Generation: "01HZZZZZZZZZZZZZZZZZZZZZZY",
		Metadata:   map[string]string{"a": "1", "b": "2", "c": "3"},
		Data:       &anypb.Any{TypeUrl: "type.googleapis.com/demo.Widget", Value: []byte{1, 2, 3}},
	}
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: res}}}
}

func TestEncodedEvents(t *testing.T) {
	c := newEncodedEvents()
	ev := testEvent("a")

	_, ok, _ := c.encoded(ev)
	require.False(t, ok, "an event that was not marked is not in the cache")

	c.mark(ev)
	data, ok, err := c.encoded(ev)
	require.True(t, ok)
	require.NoError(t, err)
	require.Len(t, data, 1)
	var back pbresource.WatchEvent
	require.NoError(t, proto.Unmarshal(data.Materialize(), &back))
	require.True(t, proto.Equal(ev, &back))

	c.mark(ev) // again: the entry and its bytes stay
	again, _, _ := c.encoded(ev)
	require.Same(t, &data[0].ReadOnlyData()[0], &again[0].ReadOnlyData()[0], "an event is marshalled once")
	require.Same(t, &data[0], &again[0], "and handed out in one BufferSlice, allocated once")

	// An equal but distinct event is another event.
	_, ok, _ = c.encoded(proto.Clone(ev).(*pbresource.WatchEvent))
	require.False(t, ok)
}

func TestEncodedEvents_Concurrent(t *testing.T) {
	c := newEncodedEvents()
	ev := testEvent("a")
	want, err := proto.Marshal(ev)
	require.NoError(t, err)
	var wg sync.WaitGroup
	bufs := make([]mem.Buffer, 8)
	for i := range bufs {
		wg.Go(func() {
			c.mark(ev)
			if data, _, _ := c.encoded(ev); len(data) == 1 {
				bufs[i] = data[0]
			}
		})
	}
	wg.Wait()
	for _, b := range bufs {
		// Each stream got the event's bytes, whichever entry it found (two
		// streams marking at once may store two).
		require.NotNil(t, b)
		var back pbresource.WatchEvent
		require.NoError(t, proto.Unmarshal(b.ReadOnlyData(), &back))
		require.True(t, proto.Equal(ev, &back))
		require.Len(t, b.ReadOnlyData(), len(want))
	}
}

func TestEventCodec(t *testing.T) {
	s := newEnv(t).server
	opts := s.ServerOptions()
	require.Len(t, opts, 1)
	require.True(t, s.encoded.inUse.Load())
	codec := &eventCodec{proto: encoding.GetCodecV2(encproto.Name), events: s.encoded}
	require.Equal(t, "proto", codec.Name())

	roundTrip := func(m proto.Message, into proto.Message) mem.BufferSlice {
		t.Helper()
		data, err := codec.Marshal(m)
		require.NoError(t, err)
		require.NoError(t, codec.Unmarshal(data, into))
		require.True(t, proto.Equal(m, into), "want %v\ngot  %v", m, into)
		return data
	}
	// Anything else, and an event that is not marked, is the proto codec's.
	roundTrip(&pbresource.ReadRequest{Id: testEvent("a").GetUpsert().Resource.Id}, &pbresource.ReadRequest{})
	ev := testEvent("a")
	roundTrip(ev, &pbresource.WatchEvent{})

	// A marked event is marshalled once; every send gets the same bytes.
	s.encoded.mark(ev)
	first := roundTrip(ev, &pbresource.WatchEvent{})
	second := roundTrip(ev, &pbresource.WatchEvent{})
	require.Len(t, first, 1)
	require.Len(t, second, 1)
	require.Same(t, &first[0].ReadOnlyData()[0], &second[0].ReadOnlyData()[0])
	first.Free() // gRPC frees what it sent; the bytes stay for the next send
	third := roundTrip(ev, &pbresource.WatchEvent{})
	require.Same(t, &second[0].ReadOnlyData()[0], &third[0].ReadOnlyData()[0])
}

func TestMarksEvents(t *testing.T) {
	env := newEnv(t)
	grpcStream := &grpc.GenericServerStream[pbresource.WatchListRequest, pbresource.WatchEvent]{}
	inproc := &inprocWatchServer{ctx: context.Background()}
	require.False(t, env.server.marksEvents(grpcStream), "the codec was not handed out")
	env.server.ServerOptions()
	require.True(t, env.server.marksEvents(grpcStream))
	require.False(t, env.server.marksEvents(inproc), "in process, nothing is marshalled")
	// A gRPC stream an interceptor wrapped (as a host's are) still sends
	// through the codec.
	wrapped := grpc.ServerStreamingServer[pbresource.WatchEvent](struct {
		grpc.ServerStreamingServer[pbresource.WatchEvent]
	}{grpcStream})
	require.True(t, env.server.marksEvents(wrapped))
}

// sentEvents is a stream interceptor that records the watch events handlers
// send, and may send something else in their place.
type sentEvents struct {
	mu      sync.Mutex
	events  []*pbresource.WatchEvent
	replace func(*pbresource.WatchEvent) *pbresource.WatchEvent
}

func (s *sentEvents) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &recordingStream{ServerStream: ss, rec: s})
}

type recordingStream struct {
	grpc.ServerStream
	rec *sentEvents
}

func (r *recordingStream) SendMsg(m any) error {
	if ev, ok := m.(*pbresource.WatchEvent); ok {
		r.rec.mu.Lock()
		r.rec.events = append(r.rec.events, ev)
		r.rec.mu.Unlock()
		if r.rec.replace != nil {
			m = r.rec.replace(ev)
		}
	}
	return r.ServerStream.SendMsg(m)
}

func (s *sentEvents) upserted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	for _, ev := range s.events {
		if name := ev.GetUpsert().GetResource().GetId().GetName(); name != "" {
			names = append(names, name)
		}
	}
	return names
}

// cachedEvents counts the events in env's cache of encoded events, and of
// those, the ones the codec has marshalled.
func cachedEvents(env *testEnv) (cached, marshalled int) {
	for i := range env.server.encoded.slots {
		if e := env.server.encoded.slots[i].Load(); e != nil {
			cached++
			if e.buf != nil {
				marshalled++
			}
		}
	}
	return cached, marshalled
}

// Over gRPC with ServerOptions, streams of one type share the marshalled
// events and still receive them intact, and a stream interceptor sees the
// events themselves; without the options, or in process, nothing is
// marshalled ahead.
func TestWatchList_SharedEncoding(t *testing.T) {
	for _, tc := range []struct {
		name      string
		transport string // "in-process", "grpc" (with ServerOptions), "grpc-plain" (without)
		shares    bool
	}{
		{"in-process", "in-process", false},
		{"grpc", "grpc", true},
		{"grpc without the options", "grpc-plain", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			rec := &sentEvents{}
			client := env.client
			switch tc.transport {
			case "grpc":
				var stop func()
				client, stop = serveGRPC(t, env, append(env.server.ServerOptions(), grpc.StreamInterceptor(rec.intercept))...)
				t.Cleanup(stop)
			case "grpc-plain":
				var stop func()
				client, stop = serveGRPC(t, env, grpc.StreamInterceptor(rec.intercept))
				t.Cleanup(stop)
			}
			req := &pbresource.WatchListRequest{Type: barID("x").Type}
			streams := []watchStream{startWatch(t, client, req), startWatch(t, client, req)}
			for _, st := range streams {
				requireSnapshot(t, st, 0)
			}
			var written []*pbresource.Resource
			for _, name := range []string{"a", "b", "c"} {
				written = append(written, env.write(t, bar(t, name, "v-"+name)))
			}
			for _, st := range streams {
				for _, w := range written {
					got := recvEvent(t, st).GetUpsert().GetResource()
					require.True(t, proto.Equal(w, got), "want %v\ngot  %v", w, got)
				}
			}
			cached, marshalled := cachedEvents(env)
			if tc.shares {
				// Three events, in as many slots unless two collide, each
				// marshalled by the codec.
				require.NotZero(t, cached)
				require.LessOrEqual(t, cached, len(written))
				require.Equal(t, cached, marshalled)
			} else {
				require.Zero(t, cached)
			}
			if tc.transport != "in-process" {
				// The interceptor saw every event as it is, not bytes.
				require.ElementsMatch(t, []string{"a", "a", "b", "b", "c", "c"}, rec.upserted())
			}
		})
	}
}

// An interceptor that sends another message in an event's place gets that
// message sent, even when the event itself is in the cache.
func TestWatchList_InterceptorReplacesEvent(t *testing.T) {
	env := newEnv(t)
	rec := &sentEvents{replace: func(ev *pbresource.WatchEvent) *pbresource.WatchEvent {
		if ev.GetUpsert() == nil {
			return ev
		}
		out := proto.Clone(ev).(*pbresource.WatchEvent)
		out.GetUpsert().Resource.Metadata = map[string]string{"redacted": "true"}
		return out
	}}
	client, stop := serveGRPC(t, env, append(env.server.ServerOptions(), grpc.StreamInterceptor(rec.intercept))...)
	t.Cleanup(stop)
	req := &pbresource.WatchListRequest{Type: barID("x").Type}
	plain, redacted := startWatch(t, env.client, req), startWatch(t, client, req)
	requireSnapshot(t, plain, 0)
	requireSnapshot(t, redacted, 0)
	env.write(t, bar(t, "a", "x"))
	require.NotContains(t, recvEvent(t, plain).GetUpsert().GetResource().GetMetadata(), "redacted")
	got := recvEvent(t, redacted).GetUpsert().GetResource()
	require.Equal(t, map[string]string{"redacted": "true"}, got.GetMetadata())
	cached, _ := cachedEvents(env)
	require.NotZero(t, cached, "the original event was marked")
}
