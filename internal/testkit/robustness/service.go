package robustness

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

func newServer(t testing.TB, b storage.Backend) *server.Server {
	t.Helper()
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	return server.New(server.Config{Backend: b, Registry: reg})
}

// NewService returns an in-process client of a ResourceService over b,
// with the example types (foo) registered.
func NewService(t testing.TB, b storage.Backend) pbresource.ResourceServiceClient {
	t.Helper()
	return server.NewInProcessClient(newServer(t, b))
}

// NewGRPCService returns a client of a ResourceService over b served by
// a gRPC server on a loopback port, with the service's ServerOptions (the
// shared encoding of watch events), stopped when the test ends.
func NewGRPCService(t testing.TB, b storage.Backend) pbresource.ResourceServiceClient {
	t.Helper()
	s := newServer(t, b)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer(s.ServerOptions()...)
	s.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		gs.Stop()
		require.NoError(t, err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	return pbresource.NewResourceServiceClient(conn)
}
