package server

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/examples/foo"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

type watchStream = grpc.ServerStreamingClient[pbresource.WatchEvent]

func startWatch(t *testing.T, client pbresource.ResourceServiceClient, req *pbresource.WatchListRequest) watchStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := client.WatchList(ctx, req)
	require.NoError(t, err)
	return stream
}

// recvEvent receives one event, failing the test if none arrives in time.
func recvEvent(t *testing.T, stream watchStream) *pbresource.WatchEvent {
	t.Helper()
	type result struct {
		ev  *pbresource.WatchEvent
		err error
	}
	ch := make(chan result, 1)
	go func() {
		ev, err := stream.Recv()
		ch <- result{ev, err}
	}()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r.ev
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
		return nil
	}
}

// requireSnapshot receives n upserts and the EndOfSnapshot, returning the
// upserted resources' names.
func requireSnapshot(t *testing.T, stream watchStream, n int) []string {
	t.Helper()
	var names []string
	for range n {
		ev := recvEvent(t, stream)
		require.NotNil(t, ev.GetUpsert(), "expected an upsert, got %v", ev)
		names = append(names, ev.GetUpsert().GetResource().GetId().GetName())
	}
	ev := recvEvent(t, stream)
	require.NotNil(t, ev.GetEndOfSnapshot(), "expected EndOfSnapshot, got %v", ev)
	return names
}

// serveLoopback serves env's server with a real grpc.Server, created with
// the server's ServerOptions as a host does, on a loopback listener and
// returns a gRPC client to it (grpc.NewClient, insecure credentials), and a
// function that closes the connection and stops the server.
func serveLoopback(t testing.TB, env *testEnv) (pbresource.ResourceServiceClient, func()) {
	t.Helper()
	return serveGRPC(t, env, env.server.ServerOptions()...)
}

// serveGRPC is serveLoopback with a grpc.Server created with opts alone.
func serveGRPC(t testing.TB, env *testEnv, opts ...grpc.ServerOption) (pbresource.ResourceServiceClient, func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer(opts...)
	env.server.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		gs.Stop()
		require.NoError(t, err)
	}
	return pbresource.NewResourceServiceClient(conn), func() {
		_ = conn.Close()
		gs.Stop()
	}
}

// grpcClient is serveLoopback, stopped when the test ends.
func grpcClient(t testing.TB, env *testEnv) pbresource.ResourceServiceClient {
	t.Helper()
	client, stop := serveLoopback(t, env)
	t.Cleanup(stop)
	return client
}

func TestWatchList(t *testing.T) {
	for name, mkClient := range map[string]func(testing.TB, *testEnv) pbresource.ResourceServiceClient{
		"in-process": func(_ testing.TB, env *testEnv) pbresource.ResourceServiceClient { return env.client },
		"grpc":       grpcClient,
	} {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t)
			client := mkClient(t, env)
			inNS := func(name, ns string) *pbresource.Resource {
				r := bar(t, name, "x")
				r.Id.Tenancy.Namespace = ns
				return r
			}
			env.write(t, inNS("w-1", "ns1"))
			env.write(t, inNS("w-2", "ns2"))
			env.write(t, inNS("other", "ns1"))
			otherPart := inNS("w-3", "ns1")
			otherPart.Id.Tenancy.Partition = "p2"
			env.write(t, otherPart)

			stream := startWatch(t, client, &pbresource.WatchListRequest{
				Type:       barID("x").Type,
				Tenancy:    &pbresource.Tenancy{Namespace: "*"}, // partition defaults to "default"
				NamePrefix: "w-",
			})
			require.ElementsMatch(t, []string{"w-1", "w-2"}, requireSnapshot(t, stream, 2))

			// Changes that do not match are not delivered: each is followed
			// by a matching one, which must be the next event.
			env.write(t, inNS("other", "ns2"))
			env.write(t, otherPart)
			upd := env.write(t, inNS("w-4", "ns3"))
			ev := recvEvent(t, stream)
			require.Equal(t, "w-4", ev.GetUpsert().GetResource().GetId().GetName())
			require.Equal(t, upd.Version, ev.GetUpsert().GetResource().GetVersion())

			require.NoError(t, env.delete(t, barID("other"), ""))
			id := barID("w-1")
			id.Tenancy.Namespace = "ns1"
			require.NoError(t, env.delete(t, id, ""))
			ev = recvEvent(t, stream)
			require.Equal(t, "w-1", ev.GetDelete().GetResource().GetId().GetName())

			// Every GroupVersion of the type is delivered.
			env.write(t, barV2(t, "w-5", "y"))
			ev = recvEvent(t, stream)
			require.Equal(t, "w-5", ev.GetUpsert().GetResource().GetId().GetName())
			require.Equal(t, "v2", ev.GetUpsert().GetResource().GetId().GetType().GetGroupVersion())

			// Wildcard partition too.
			all := startWatch(t, client, &pbresource.WatchListRequest{
				Type:    barID("x").Type,
				Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"},
			})
			require.ElementsMatch(t, []string{"w-2", "w-3", "w-4", "w-5", "other", "other"}, requireSnapshot(t, all, 6))
		})
	}
}

func TestWatchList_CancelEndsStream(t *testing.T) {
	env := newEnv(t)
	for name, client := range map[string]pbresource.ResourceServiceClient{
		"in-process": env.client,
		"grpc":       grpcClient(t, env),
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			stream, err := client.WatchList(ctx, &pbresource.WatchListRequest{Type: barID("x").Type})
			require.NoError(t, err)
			requireSnapshot(t, stream, 0)
			cancel()
			for {
				_, err := stream.Recv()
				if err != nil {
					requireCode(t, err, codes.Canceled)
					break
				}
			}
		})
	}
}

func TestWatchList_SlowWatcherIsAborted(t *testing.T) {
	env := newEnv(t, withWatchBuffer(4))
	stream := startWatch(t, env.client, &pbresource.WatchListRequest{Type: barID("x").Type})
	requireSnapshot(t, stream, 0)

	// Writers never wait for the watcher, however far behind it is.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 500 {
			env.write(t, bar(t, "a", string(rune('a'+i%26))))
		}
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("writers blocked by a slow watcher")
	}

	var err error
	for err == nil {
		_, err = stream.Recv()
	}
	requireCode(t, err, codes.Aborted, "WatchList")
}

func TestWatchList_ACL(t *testing.T) {
	env := newEnv(t, withACL(func(context.Context) (resource.Authorizer, error) {
		return resource.AuthorizerFunc(func(a resource.Access, id *pbresource.ID) bool {
			return a != resource.AccessRead || id.Name != "secret"
		}), nil
	}))
	env.write(t, bar(t, "secret", "x"))
	env.write(t, bar(t, "public", "x"))
	stream := startWatch(t, env.client, &pbresource.WatchListRequest{Type: barID("x").Type})
	require.Equal(t, []string{"public"}, requireSnapshot(t, stream, 1))
	env.write(t, bar(t, "secret", "y"))
	env.write(t, bar(t, "public", "y"))
	require.Equal(t, "public", recvEvent(t, stream).GetUpsert().GetResource().GetId().GetName())
}

// TestWatchList_InProcessHandsOverEvents checks that in-process watchers
// receive the server's own event for a change, the same message on every
// stream: events are immutable, so no copy is needed.
func TestWatchList_InProcessHandsOverEvents(t *testing.T) {
	env := newEnv(t)
	req := &pbresource.WatchListRequest{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}}
	a, b := startWatch(t, env.client, req), startWatch(t, env.client, req)
	requireSnapshot(t, a, 0)
	requireSnapshot(t, b, 0)

	written := env.write(t, bar(t, "one", "x"))
	evA, evB := recvEvent(t, a), recvEvent(t, b)
	assert.Same(t, evA, evB, "one event, handed to both streams")
	assert.True(t, proto.Equal(written, evA.GetUpsert().GetResource()))
}
