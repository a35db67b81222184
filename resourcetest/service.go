package resourcetest

import (
	"context"
	"net"
	"testing"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/inmem"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// Service is a running in-process ResourceService.
type Service struct {
	// Client talks to the service. By default it calls the server directly
	// (messages are copied, never shared); with OverGRPC it is a real gRPC
	// client over an in-memory connection.
	Client pbresource.ResourceServiceClient
	// Server is the service itself.
	Server *server.Server
	// Backend is the in-memory store behind it.
	Backend *inmem.Backend
	// Registry holds the registered types.
	Registry resource.Registry
}

// ServiceOption configures StartService.
type ServiceOption func(*serviceConfig)

type serviceConfig struct {
	register    []func(resource.Registry)
	aclResolver func(ctx context.Context) (resource.Authorizer, error)
	overGRPC    bool
	backendOpts []inmem.Option
}

// WithTypes registers types, e.g. WithTypes(foo.RegisterTypes).
func WithTypes(register ...func(resource.Registry)) ServiceOption {
	return func(c *serviceConfig) { c.register = append(c.register, register...) }
}

// WithACLResolver makes the service authorize requests with resolve.
func WithACLResolver(resolve func(ctx context.Context) (resource.Authorizer, error)) ServiceOption {
	return func(c *serviceConfig) { c.aclResolver = resolve }
}

// OverGRPC makes Client a real gRPC client (over an in-memory listener), so
// messages are marshalled as they would be over the network.
func OverGRPC() ServiceOption {
	return func(c *serviceConfig) { c.overGRPC = true }
}

// WithBackendOptions passes options to the in-memory backend.
func WithBackendOptions(opts ...inmem.Option) ServiceOption {
	return func(c *serviceConfig) { c.backendOpts = append(c.backendOpts, opts...) }
}

// RunResourceService starts a ResourceService with the given types
// registered and returns a client for it. It is stopped when the test ends.
func RunResourceService(t testing.TB, register ...func(resource.Registry)) pbresource.ResourceServiceClient {
	return StartService(t, WithTypes(register...)).Client
}

// StartService starts a ResourceService configured by opts; it is stopped
// when the test ends.
func StartService(t testing.TB, opts ...ServiceOption) *Service {
	t.Helper()
	var cfg serviceConfig
	for _, o := range opts {
		o(&cfg)
	}
	registry := resource.NewRegistry()
	for _, r := range cfg.register {
		r(registry)
	}
	backend := inmem.New(cfg.backendOpts...)
	srv := server.New(server.Config{Backend: backend, Registry: registry, ACLResolver: cfg.aclResolver})
	svc := &Service{Server: srv, Backend: backend, Registry: registry}
	if !cfg.overGRPC {
		svc.Client = server.NewInProcessClient(srv)
		return svc
	}
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	srv.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	)
	if err != nil {
		t.Fatalf("resourcetest: connecting to the in-memory gRPC server: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	svc.Client = pbresource.NewResourceServiceClient(conn)
	return svc
}
