package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/server/reaper"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

const (
	defaultGRPCAddr        = "127.0.0.1:8502"
	defaultShutdownTimeout = 10 * time.Second
)

type serverFlags struct {
	dev             bool
	grpcAddr        string
	storage         string
	logLevel        string
	logJSON         bool
	shutdownTimeout time.Duration
	maxResource     int
	etcd            etcdFlags
}

func parseServerFlags(args []string, output io.Writer) (serverFlags, error) {
	var f serverFlags
	fs := flag.NewFlagSet("loom server", flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(output, "Usage: loom server -dev [flags]\n"+
			"       loom server -storage etcd -etcd-endpoints host:port,... [flags]\n\n"+
			"Runs a Loom server: the ResourceService over gRPC (with server reflection,\n"+
			"so grpcurl needs no protoset), the gRPC health service, and the controllers\n"+
			"of the example types of examples/foo (foo.v1.Bar, foo.v2.Bar, foo.v1.Zip,\n"+
			"foo.v1.Qux) with the built-in tombstone reaper.\n\n"+
			"-dev keeps resources in memory (they are gone when the server stops); the\n"+
			"server is always the leader.\n\n"+
			"-storage etcd keeps them in an etcd cluster that several servers share.\n"+
			"Every server serves the API; the servers elect a leader through etcd\n"+
			"(-lease-ttl), and only the leader runs the controllers, fencing its writes\n"+
			"so a deposed leader's late writes are refused. The password may be given\n"+
			"in the environment variable %s instead of -etcd-password.\n\nFlags:\n", etcdPasswordEnv)
		fs.PrintDefaults()
	}
	fs.BoolVar(&f.dev, "dev", false, "run a development server: in-memory storage and the example types")
	fs.StringVar(&f.grpcAddr, "grpc-addr", defaultGRPCAddr, "`address` the gRPC server listens on (port 0 picks a free port)")
	fs.StringVar(&f.storage, "storage", "inmem", "storage `backend`: inmem (with -dev) or etcd")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `level`: trace, debug, info, warn or error")
	fs.BoolVar(&f.logJSON, "log-json", false, "write logs as JSON lines")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout,
		"how long to let in-flight requests finish on SIGINT/SIGTERM before closing connections")
	fs.IntVar(&f.maxResource, "max-resource-bytes", server.DefaultMaxResourceBytes,
		"largest resource the server stores, in `bytes` of its encoding; keep it under the clients' gRPC message limit (4 MiB by default) and etcd's --max-request-bytes (1.5 MiB by default)")
	f.etcd.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, usageError{err}
	}
	if fs.NArg() > 0 {
		return f, usagef("server: unexpected argument %q", fs.Arg(0))
	}
	if hclog.LevelFromString(f.logLevel) == hclog.NoLevel {
		return f, usagef("server: unknown -log-level %q (want trace, debug, info, warn or error)", f.logLevel)
	}
	if f.shutdownTimeout <= 0 {
		return f, usagef("server: -shutdown-timeout must be positive")
	}
	if f.maxResource <= 0 {
		return f, usagef("server: -max-resource-bytes must be positive")
	}
	switch f.storage {
	case "inmem":
		if set := etcdFlagsSet(fs); set != "" {
			return f, usagef("server: -%s is for -storage etcd", set)
		}
		if !f.dev {
			return f, usagef("server: in-memory storage is for the development server: " +
				"run 'loom server -dev', or 'loom server -storage etcd -etcd-endpoints ...' to keep resources in etcd")
		}
	case "etcd":
		if f.dev {
			return f, usagef("server: -dev runs on in-memory storage; leave it out with -storage etcd " +
				"(the example types are served either way)")
		}
		if err := f.etcd.check(); err != nil {
			return f, err
		}
	default:
		return f, usagef("server: unknown -storage %q (want inmem or etcd)", f.storage)
	}
	return f, nil
}

// runServer is `loom server`. It serves until ctx ends, then shuts down: no
// new connections or RPCs are accepted, open WatchList streams are ended with
// Unavailable (clients re-watch elsewhere), and unary RPCs in flight get up
// to -shutdown-timeout to finish before the remaining connections are closed.
// It returns nil after a clean shutdown.
func runServer(ctx context.Context, args []string, _, stderr io.Writer) error {
	f, err := parseServerFlags(args, stderr)
	if err != nil {
		return err
	}

	logger := hclog.New(&hclog.LoggerOptions{
		Name:       "loom",
		Level:      hclog.LevelFromString(f.logLevel),
		Output:     stderr,
		JSONFormat: f.logJSON,
	})

	// What the storage needs: the backend, the leader lease (nil: this
	// server is always the leader) and what to close when the server has
	// stopped.
	var (
		backend storage.Backend
		lease   leaderLease
		closeFn = func() {}
	)
	switch f.storage {
	case "etcd":
		st, err := openEtcd(ctx, f.etcd, logger)
		if err != nil {
			return err
		}
		backend, lease, closeFn = st.backend, st.lease, st.close
	default:
		backend = inmem.New()
	}
	defer closeFn()
	registry := resource.NewRegistry()
	foo.RegisterTypes(registry)

	svc := server.New(server.Config{
		Backend:          backend,
		Registry:         registry,
		Logger:           logger.Named("resource"),
		MaxResourceBytes: f.maxResource,
	})

	lis, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}

	// The controllers run in this process and talk to the service directly.
	// A single in-memory server is always the leader; on etcd the servers
	// elect one.
	var mgrOpts []controller.ManagerOption
	if lease != nil {
		mgrOpts = append(mgrOpts, controller.WithLease(lease))
	}
	mgr, err := controller.NewManager(server.NewInProcessClient(svc), logger.Named("controller"), mgrOpts...)
	if err != nil {
		return fmt.Errorf("server: %w", err)
	}
	mgr.Register(reaper.Controller())
	foo.RegisterControllers(mgr)
	if lease == nil {
		mgr.SetLeader(true)
	}
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	defer stopMgr()
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Run(mgrCtx) }()

	shuttingDown, beginShutdown := context.WithCancel(context.Background())
	defer beginShutdown()
	gs := grpc.NewServer(grpc.ChainStreamInterceptor(endStreamsOnShutdown(shuttingDown)))
	svc.Register(gs)
	healthSrv := health.NewServer()
	healthpb.RegisterHealthServer(gs, healthSrv)
	reflection.Register(gs)

	serveErr := make(chan error, 1)
	go func() { serveErr <- gs.Serve(lis) }()

	if f.dev {
		logger.Info("development server: resources are kept in memory and lost on exit",
			"storage", f.storage, "types", typeNames(registry))
	} else {
		logger.Info("serving", "storage", f.storage, "types", typeNames(registry))
	}
	// Tests and people read the bound address from this line (useful with
	// -grpc-addr 127.0.0.1:0).
	logger.Info("gRPC server listening", "addr", lis.Addr().String())

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		// Serve only returns early when the listener fails.
		return fmt.Errorf("server: serving gRPC: %w", err)
	}

	logger.Info("shutting down", "timeout", f.shutdownTimeout)
	healthSrv.Shutdown()
	beginShutdown()
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(f.shutdownTimeout)
	defer timer.Stop()
	select {
	case <-stopped:
	case <-timer.C:
		logger.Warn("requests still running after the shutdown timeout; closing their connections")
		gs.Stop()
		<-stopped
	}
	stopMgr()
	if err := <-mgrDone; err != nil {
		logger.Error("controller manager", "error", err)
	}
	if err := <-serveErr; err != nil {
		return fmt.Errorf("server: serving gRPC: %w", err)
	}
	logger.Info("stopped")
	return nil
}

func typeNames(r resource.Registry) string {
	var names []string
	for _, reg := range r.Types() {
		names = append(names, resource.TypeString(reg.Type))
	}
	return strings.Join(names, ",")
}

// endStreamsOnShutdown cancels the context of every streaming RPC (WatchList)
// once shuttingDown ends. GracefulStop waits for handlers to return, and a
// watch only returns when its context ends, so without this one open watch
// would hold shutdown for the whole timeout. A stream ended this way reports
// Unavailable, which tells the client to retry against another server.
func endStreamsOnShutdown(shuttingDown context.Context) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, cancel := context.WithCancel(ss.Context())
		defer cancel()
		stop := context.AfterFunc(shuttingDown, cancel)
		defer stop()
		err := handler(srv, streamWithContext{ServerStream: ss, ctx: ctx})
		if err != nil && shuttingDown.Err() != nil && ss.Context().Err() == nil {
			return status.Error(codes.Unavailable, "server is shutting down")
		}
		return err
	}
}

type streamWithContext struct {
	grpc.ServerStream
	ctx context.Context
}

func (s streamWithContext) Context() context.Context { return s.ctx }
