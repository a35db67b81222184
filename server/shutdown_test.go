package server

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
)

// requireShuttingDown fails unless err is ErrShuttingDown as a client sees it.
func requireShuttingDown(t *testing.T, err error) {
	t.Helper()
	st := status.Convert(err)
	require.Equal(t, codes.Unavailable, st.Code(), "error %v", err)
	require.Equal(t, "server is shutting down", st.Message())
}

// TestShutdown_EndsWatchesWithBacklog: Shutdown ends open watches with
// Unavailable "server is shutting down" at their next event, without first
// sending what is queued for them, over gRPC and in process; new watches
// fail the same way; unary RPCs still work.
func TestShutdown_EndsWatchesWithBacklog(t *testing.T) {
	const backlog = 5000
	env := newEnv(t)

	// Over gRPC, with a fixed flow-control window so that what the server
	// has already handed to gRPC when Shutdown is called is bounded (about
	// two 64 KiB windows, a few hundred events).
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer()
	env.server.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithInitialWindowSize(64<<10))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	clients := map[string]pbresource.ResourceServiceClient{
		"in-process": env.client,
		"grpc":       pbresource.NewResourceServiceClient(conn),
	}

	req := &pbresource.WatchListRequest{Type: barID("x").Type}
	streams := map[string]watchStream{}
	for name, client := range clients {
		streams[name] = startWatch(t, client, req)
		requireSnapshot(t, streams[name], 0)
	}
	// A backlog the watchers do not read yet.
	for i := range backlog {
		env.write(t, bar(t, fmt.Sprintf("b-%d", i), "x"))
	}

	env.server.Shutdown()
	env.server.Shutdown() // twice is harmless

	for name, stream := range streams {
		t.Run(name, func(t *testing.T) {
			received := 0
			for {
				_, err := stream.Recv()
				if err != nil {
					requireShuttingDown(t, err)
					break
				}
				received++
			}
			t.Logf("%d of %d queued events received after Shutdown", received, backlog)
			require.Less(t, received, backlog/2, "the stream sent its backlog before ending")

			// A new watch is refused; unary RPCs still work.
			client := clients[name]
			s, err := client.WatchList(testCtx(t), req)
			if err == nil {
				_, err = s.Recv()
			}
			requireShuttingDown(t, err)
			_, err = client.Read(testCtx(t), &pbresource.ReadRequest{Id: barID("b-0")})
			require.NoError(t, err)
		})
	}
}

// TestShutdown_InProcessWatcherNotReading: an in-process watch whose reader
// has stopped (its server side blocked handing over an event) also ends at
// Shutdown.
func TestShutdown_InProcessWatcherNotReading(t *testing.T) {
	env := newEnv(t)
	stream := startWatch(t, env.client, &pbresource.WatchListRequest{Type: barID("x").Type})
	requireSnapshot(t, stream, 0)
	for i := range 2 * inprocWatchBuffer {
		env.write(t, bar(t, fmt.Sprintf("b-%d", i), "x"))
	}
	env.server.Shutdown()
	w := stream.(*inprocWatch)
	select {
	case <-w.done:
	case <-testCtx(t).Done():
		t.Fatal("the server side of the watch did not end after Shutdown")
	}
	requireShuttingDown(t, w.err)
}
