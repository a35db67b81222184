package server

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
)

func TestEncodedEvents_StandIn(t *testing.T) {
	c := newEncodedEvents()
	res := &pbresource.Resource{}
	fill(res.ProtoReflect(), 0, 0)
	ev := &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: res}}}

	in, err := c.standIn(ev)
	require.NoError(t, err)
	require.NotSame(t, ev, in)
	// The stand-in holds nothing but the event's bytes (their map entries
	// in whatever order marshalling chose), so it decodes to the event.
	require.Equal(t, proto.Size(ev), proto.Size(in))
	got, err := proto.Marshal(in)
	require.NoError(t, err)
	require.Equal(t, []byte(in.ProtoReflect().GetUnknown()), got)
	var back pbresource.WatchEvent
	require.NoError(t, proto.Unmarshal(got, &back))
	require.True(t, proto.Equal(ev, &back))

	again, err := c.standIn(ev)
	require.NoError(t, err)
	require.Same(t, in, again, "an event is marshalled once")

	// An equal but distinct event gets its own stand-in.
	other, err := c.standIn(proto.Clone(ev).(*pbresource.WatchEvent))
	require.NoError(t, err)
	require.NotSame(t, in, other)
}

func TestSharesEncoding(t *testing.T) {
	grpcStream := &grpc.GenericServerStream[pbresource.WatchListRequest, pbresource.WatchEvent]{}
	for ct, want := range map[string]bool{
		"application/grpc":       true,
		"application/grpc+proto": true,
		"application/grpc;proto": true,
		"Application/GRPC+Proto": true,
		"application/grpc+json":  false,
		"application/grpc+":      false,
		"application/grpcx":      false,
		"text/plain":             false,
		"":                       false,
	} {
		ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("content-type", ct))
		require.Equal(t, want, sharesEncoding(ctx, grpcStream), "content-type %q", ct)
	}
	require.False(t, sharesEncoding(context.Background(), grpcStream), "no content type")

	// The in-process stream copies events field by field: never stand-ins,
	// whatever metadata the caller sent.
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("content-type", "application/grpc"))
	require.False(t, sharesEncoding(ctx, &inprocWatchServer{ctx: ctx}))
}

// Over gRPC, streams of one type share the marshalled events and still
// receive them intact; in process, nothing is marshalled.
func TestWatchList_SharedEncoding(t *testing.T) {
	cached := func(env *testEnv) int {
		n := 0
		for i := range env.server.encoded.slots {
			if env.server.encoded.slots[i].Load() != nil {
				n++
			}
		}
		return n
	}
	for name, overGRPC := range map[string]bool{"in-process": false, "grpc": true} {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t)
			client := env.client
			if overGRPC {
				client = grpcClient(t, env)
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
			if overGRPC {
				// Three events, in as many slots unless two collide.
				require.NotZero(t, cached(env))
				require.LessOrEqual(t, cached(env), len(written))
			} else {
				require.Zero(t, cached(env))
			}
		})
	}
}
