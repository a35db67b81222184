package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/server/reaper"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

const (
	defaultGRPCAddr        = "127.0.0.1:8502"
	defaultShutdownTimeout = 10 * time.Second

	// shutdownStreamGrace is how long streams get, once shutdown begins,
	// to deliver their final status before the connections still open are
	// closed (as soon as no unary RPC is running). A client that reads
	// needs far less; one that has stopped reading never takes it (see
	// stopGRPC).
	shutdownStreamGrace = 500 * time.Millisecond
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
		"how long to let in-flight unary requests finish on SIGINT/SIGTERM before closing connections (open watches end at once)")
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
// Unavailable "server is shutting down" (clients re-watch elsewhere), and
// unary RPCs in flight get up to -shutdown-timeout to finish before the
// remaining connections are closed; connections held open only by streams
// whose clients do not read are closed as soon as no unary RPC is left (see
// stopGRPC). It returns nil after a clean shutdown.
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
	if err := foo.RegisterTypes(registry); err != nil {
		return fmt.Errorf("server: %w", err)
	}

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
	if err := mgr.Register(reaper.Controller()); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if err := foo.RegisterControllers(mgr); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if lease == nil {
		mgr.SetLeader(true)
	}
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	defer stopMgr()
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Run(mgrCtx) }()

	shuttingDown, beginShutdown := context.WithCancel(context.Background())
	defer beginShutdown()
	var unary unaryTracker
	gs := grpc.NewServer(append(svc.ServerOptions(),
		grpc.ChainStreamInterceptor(endStreamsOnShutdown(shuttingDown)),
		grpc.ChainUnaryInterceptor(unary.intercept),
	)...)
	svc.Register(gs)
	healthSrv := health.NewServer()
	healthpb.RegisterHealthServer(gs, healthSrv)
	registerReflection(gs)

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
	svc.Shutdown()
	beginShutdown()
	stopGRPC(gs, &unary, f.shutdownTimeout, shutdownStreamGrace, logger)
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

// stopGRPC stops gs once shutdown has begun (the ResourceService's watches
// and the other streams have been told to end): GracefulStop, which refuses
// new RPCs and waits for every connection to drain, cut short by Stop, which
// closes the connections still open, when
//
//   - streamGrace has passed since the start and no unary RPC has run for
//     streamGrace (so its response had time to go out), or
//   - timeout has passed, whatever is running.
//
// The first is what keeps clients that do not read from holding shutdown
// for the whole timeout. gRPC flow control holds a stream's final status
// behind the events its client has not read, so such a stream never ends
// and its connection never drains; its handler may even be blocked in Send,
// which only returns when the stream's transport ends (Stop). Clients that
// read get their final status (Unavailable "server is shutting down")
// within streamGrace; those that do not see their connection close.
func stopGRPC(gs *grpc.Server, unary *unaryTracker, timeout, streamGrace time.Duration, logger hclog.Logger) {
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	quiet := time.NewTimer(min(streamGrace, timeout))
	defer quiet.Stop()
	var idle <-chan struct{} // while a unary RPC runs: closed when none does
wait:
	for {
		select {
		case <-stopped:
			return
		case <-deadline.C:
			logger.Warn("requests still running after the shutdown timeout; closing their connections")
			break wait
		case <-idle:
			idle = nil
			quiet.Reset(streamGrace)
		case <-quiet.C:
			running, lastEnd, idleCh := unary.state()
			if running {
				idle = idleCh
				continue
			}
			if rest := streamGrace - time.Since(lastEnd); rest > 0 {
				quiet.Reset(rest)
				continue
			}
			logger.Info("streams still open after they were ended (clients not reading?); closing their connections")
			break wait
		}
	}
	gs.Stop()
	<-stopped
}

// unaryTracker follows the unary RPCs running, through its interceptor.
// The zero value is ready to use.
type unaryTracker struct {
	mu      sync.Mutex
	running int
	lastEnd time.Time     // when the last one ended
	idle    chan struct{} // made when running leaves 0, closed when it is back
}

// intercept is a grpc.UnaryServerInterceptor that counts the call.
func (u *unaryTracker) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	u.mu.Lock()
	if u.running == 0 {
		u.idle = make(chan struct{})
	}
	u.running++
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.running--
		if u.running == 0 {
			u.lastEnd = time.Now()
			close(u.idle)
		}
		u.mu.Unlock()
	}()
	return handler(ctx, req)
}

// state reports whether a unary RPC is running, when the last one ended,
// and, while one runs, a channel closed when none does.
func (u *unaryTracker) state() (running bool, lastEnd time.Time, idle <-chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.running > 0, u.lastEnd, u.idle
}

// endStreamsOnShutdown cancels the context of every streaming RPC once
// shuttingDown ends (the ResourceService ends its WatchLists itself, at
// svc.Shutdown; this covers the others, such as the health service's
// Watch). GracefulStop waits for handlers to return, and a stream like a
// watch only returns when its context ends, so without this one open stream
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
			return server.ErrShuttingDown
		}
		return err
	}
}

type streamWithContext struct {
	grpc.ServerStream
	ctx context.Context
}

func (s streamWithContext) Context() context.Context { return s.ctx }
