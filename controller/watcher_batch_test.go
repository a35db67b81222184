package controller_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/loomrt/loom/proto/pbresource"
)

// batchCounter counts, on a client connection, the WatchList calls that
// asked for batches of events and the batches received.
type batchCounter struct {
	asked, batches atomic.Int64
}

func (c *batchCounter) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || desc.StreamName != "WatchList" {
		return cs, err
	}
	return &countingClientStream{ClientStream: cs, c: c}, nil
}

type countingClientStream struct {
	grpc.ClientStream
	c *batchCounter
}

func (s *countingClientStream) SendMsg(m any) error {
	if req, ok := m.(*pbresource.WatchListRequest); ok && req.BatchEvents {
		s.c.asked.Add(1)
	}
	return s.ClientStream.SendMsg(m)
}

func (s *countingClientStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if ev, ok := m.(*pbresource.WatchEvent); ok && err == nil && ev.GetBatch() != nil {
		s.c.batches.Add(1)
	}
	return err
}

// TestRemoteCacheReadsBatches checks that a Manager's remote cache asks for
// batches of events and, given some (a large snapshot, a burst of
// changes), caches exactly the server's resources.
func TestRemoteCacheReadsBatches(t *testing.T) {
	svc := startService(t)
	writer := svc.Client
	for i := range 1000 {
		writeBar(t, writer, fmt.Sprint("bar-", i), "b", nil)
	}
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(svc.Server.ServerOptions()...)
	svc.Server.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	var counter batchCounter
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(counter.intercept))
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	m := startBarManager(t, pbresource.NewResourceServiceClient(conn))
	require.Positive(t, counter.asked.Load(), "the cache watcher did not ask for batches")
	requireCacheEqualsServer(t, m, writer)

	for i := range 1000 {
		writeBar(t, writer, fmt.Sprint("bar-", i), "c", nil)
		writeBar(t, writer, fmt.Sprint("new-", i), "n", nil)
	}
	require.Eventually(t, func() bool { return cacheEqualsServer(t, m, writer) == "" }, 10*time.Second, 5*time.Millisecond,
		"the remote cache did not catch up with the server")
	require.Positive(t, counter.batches.Load(), "no batch of events came")
	t.Logf("%d batches", counter.batches.Load())
}
