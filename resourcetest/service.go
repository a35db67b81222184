package resourcetest

import (
	"context"
	"net"
	"time"

	"github.com/loomrt/loom/controller"
	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	pbcatalogv1 "github.com/loomrt/loom/proto/pbcatalog/v1"
	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/builtin"
	"github.com/loomrt/loom/server/bulk"
	"github.com/loomrt/loom/server/catalog"
	"github.com/loomrt/loom/server/history"
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
	// History talks to the history service (package server/history) on
	// the same connection as Client, with OverGRPC; nil otherwise.
	History pbhistoryv1.HistoryServiceClient
	// Bulk talks to the bulk import and export service (package
	// server/bulk) on the same connection as Client, with OverGRPC; nil
	// otherwise.
	Bulk pbbulkv1.BulkServiceClient
	// Catalog talks to the catalog service (package server/catalog) on
	// the same connection as Client, with OverGRPC; nil otherwise.
	Catalog pbcatalogv1.CatalogServiceClient
	// Server is the service itself.
	Server *server.Server
	// Backend is the in-memory store behind it.
	Backend *inmem.Backend
	// Registry holds the registered types.
	Registry resource.Registry
	// Builtins is the Manager running the built-in controllers (the
	// tombstone reaper), or nil without WithBuiltinControllers.
	Builtins *controller.Manager
}

// Resource starts declaring a resource of typ called name, like the
// package-level Resource, bound to the service's registry: its Build and
// ID fill empty tenancy units with the defaults of typ's scope, exactly as
// the service will store them.
func (s *Service) Resource(typ *pbresource.Type, name string) *ResourceBuilder {
	return Resource(typ, name).WithRegistry(s.Registry)
}

// ServiceOption configures StartService.
type ServiceOption func(*serviceConfig)

type serviceConfig struct {
	register    []func(resource.Registry) error
	aclResolver func(ctx context.Context) (resource.Authorizer, error)
	overGRPC    bool
	backendOpts []inmem.Option
	builtins    bool
	consulLike  bool
	consulStale time.Duration
}

// WithTypes registers types, e.g. WithTypes(foo.RegisterTypes). StartService
// fails the test if one returns an error.
func WithTypes(register ...func(resource.Registry) error) ServiceOption {
	return func(c *serviceConfig) { c.register = append(c.register, register...) }
}

// WithACLResolver makes the service authorize requests with resolve.
func WithACLResolver(resolve func(ctx context.Context) (resource.Authorizer, error)) ServiceOption {
	return func(c *serviceConfig) { c.aclResolver = resolve }
}

// OverGRPC makes Client a real gRPC client (over an in-memory listener), so
// messages are marshalled as they would be over the network, and serves
// the history, bulk and catalog services beside it (Service.History,
// Service.Bulk, Service.Catalog).
func OverGRPC() ServiceOption {
	return func(c *serviceConfig) { c.overGRPC = true }
}

// WithBackendOptions passes options to the in-memory backend.
func WithBackendOptions(opts ...inmem.Option) ServiceOption {
	return func(c *serviceConfig) { c.backendOpts = append(c.backendOpts, opts...) }
}

// WithBuiltinControllers also runs the controllers a Loom host runs next
// to the service (today the tombstone reaper, which carries out cascading
// deletion), on a Manager of their own that is leader until the test ends.
// They call the service through the same client as the test, so an ACL
// resolver given with WithACLResolver must let them through.
func WithBuiltinControllers() ServiceOption {
	return func(c *serviceConfig) { c.builtins = true }
}

// RunResourceService starts a ResourceService with the given types
// registered and returns a client for it. It is stopped when the test ends.
// It fails t if a type cannot be registered.
func RunResourceService(t T, register ...func(resource.Registry) error) pbresource.ResourceServiceClient {
	return StartService(t, WithTypes(register...)).Client
}

// StartService starts a ResourceService configured by opts; it is stopped
// when the test ends.
func StartService(t T, opts ...ServiceOption) *Service {
	t.Helper()
	var cfg serviceConfig
	for _, o := range opts {
		o(&cfg)
	}
	registry := resource.NewRegistry()
	for _, r := range cfg.register {
		if err := r(registry); err != nil {
			fatalf(t, "resourcetest: registering types: %v", err)
		}
	}
	backend := inmem.New(cfg.backendOpts...)
	srv := server.New(server.Config{Backend: backend, Registry: registry, ACLResolver: cfg.aclResolver})
	svc := &Service{Server: srv, Backend: backend, Registry: registry}
	if !cfg.overGRPC {
		svc.Client = server.NewInProcessClient(srv)
	} else {
		conn := startGRPC(t, srv)
		svc.Client = pbresource.NewResourceServiceClient(conn)
		svc.History = pbhistoryv1.NewHistoryServiceClient(conn)
		svc.Bulk = pbbulkv1.NewBulkServiceClient(conn)
		svc.Catalog = pbcatalogv1.NewCatalogServiceClient(conn)
	}
	if cfg.consulLike {
		svc.Client = newConsulClient(svc.Client, cfg.consulStale)
	}
	if cfg.builtins {
		svc.Builtins = RunControllers(t, svc.Client, builtin.Controllers()...)
	}
	return svc
}

// startGRPC serves srv and its history, bulk and catalog services over an
// in-memory listener and returns a connection to them; all stop when the
// test ends.
func startGRPC(t T, srv *server.Server) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(srv.ServerOptions()...)
	srv.Register(gs)
	history.New(srv).Register(gs)
	bulk.New(srv, bulk.DefaultLimits).Register(gs)
	catalog.New(srv).Register(gs)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	)
	if err != nil {
		fatalf(t, "resourcetest: connecting to the in-memory gRPC server: %v", err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	return conn
}
