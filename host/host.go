// Package host runs a Loom server for your own resource types and
// controllers: the ResourceService over gRPC, the controller Manager with
// the built-in tombstone reaper, storage (in memory with -dev, etcd
// otherwise) with leader election and fencing, gRPC reflection and health,
// signals and graceful shutdown. A controller author's main is a few lines:
//
//	func main() {
//		host.Main(func(h *host.Host) error {
//			if err := mytypes.Register(h.Registry()); err != nil {
//				return err
//			}
//			return h.Manager().Register(mycontroller.New())
//		})
//	}
//
// The host owns its command line (run the binary with -h for the flags):
// TLS on the gRPC listener (-tls-cert, -tls-key, -tls-client-ca for mutual
// TLS), ACLs (-acl-file; the host's own controllers are never blocked),
// HTTP endpoints (-http-addr: /metrics, /healthz, /readyz; -pprof; over
// TLS with -http-tls; /metrics and pprof behind -http-token-file; the
// read-only web console under /ui/ with -ui, on by default with -dev, see
// package console), a drain
// on SIGTERM (-drain-period: /readyz fails while it serves on), and
// limits on connections and messages (-max-conns, -max-http-conns,
// -handshake-timeout, -max-streams-per-conn, -max-recv-msg-bytes, and
// keepalive: -keepalive-min-time, -keepalive-time, -max-conn-idle), and
// on etcd warm followers (-warm-standby: servers that do not lead keep the
// controllers' caches current, to take over at once; /readyz has a line
// "leader: leading", "leader: following (warm)" or "leader: following
// (cold)"). With
// ACLs on, refused requests have info log lines naming the token (never
// its secret): the first at once, then one line per 10 s counting the
// refusals since, per token, method and code; loom_requests_denied_total
// counts every one. A certificate or ACL file that cannot be loaded, or a
// certificate out of its validity window, stops it at start; ACLs without
// TLS on a non-loopback address get a warning.
// cmd/loom's `loom server` is such a host, serving the example types.
//
// Controllers can run in processes of their own instead: package remote is
// their counterpart of Main (flags for the server address, TLS and token,
// leader election among replicas on loom.v1.Lease resources, a type every
// host serves, and the HTTP endpoints). Start such a host with
// -controllers=false: it serves the types its RegisterFunc registers but
// does not run the controllers it registers (the reaper runs all the same).
// WithListening tells a test or a wrapper the addresses the host bound. Not
// built yet: watch gauges for etcd storage (the in-memory backend's are on
// /metrics).
package host

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/internal/daemon"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/leaderelection"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/builtin"
	"github.com/loomrt/loom/server/bulk"
	"github.com/loomrt/loom/server/catalog"
	"github.com/loomrt/loom/server/history"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

// Host is a running host as its registration function sees it: where to
// register resource types and controllers before it serves.
type Host struct {
	registry resource.Registry
	mgr      *controller.Manager
	metrics  prometheus.Registerer
	logger   hclog.Logger
	dev      bool
}

// Registry returns the registry of the resource types the server accepts,
// which holds loom.v1.Lease already (see package leaderelection).
func (h *Host) Registry() resource.Registry { return h.registry }

// Manager returns the controller Manager, with the reaper already
// registered; register your controllers on it. With -controllers=false it
// is a Manager that never runs (the reaper runs all the same): the
// controllers registered on it run in processes of their own.
func (h *Host) Manager() *controller.Manager { return h.mgr }

// Metrics returns where to register the user's own Prometheus metrics:
// they are served on /metrics beside the host's.
func (h *Host) Metrics() prometheus.Registerer { return h.metrics }

// Logger returns the host's logger, for the user's controllers.
func (h *Host) Logger() hclog.Logger { return h.logger }

// Dev reports whether the host runs as a development server (-dev).
func (h *Host) Dev() bool { return h.dev }

// RegisterFunc registers a host's resource types and controllers. An
// error stops the host before it serves.
type RegisterFunc func(*Host) error

// Option configures Main and Run.
type Option func(*options)

type options struct {
	name        string
	description string
	flags       []func(*flag.FlagSet)
	listening   func(Addrs)
}

// WithName sets the command name shown in usage and messages (default:
// the program's file name).
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithDescription sets a paragraph describing the host, shown by -h.
func WithDescription(text string) Option { return func(o *options) { o.description = text } }

// WithFlags lets a host define flags of its own: add is called with the
// host's flag set before the command line is parsed, so the values the
// flags point at are set when the RegisterFunc runs. Names the host
// already defines panic, as with any flag.FlagSet.
func WithFlags(add func(*flag.FlagSet)) Option {
	return func(o *options) { o.flags = append(o.flags, add) }
}

// Addrs are the addresses a host listens on, as host:port: the port the
// system chose when -grpc-addr or -http-addr asked for port 0.
type Addrs struct {
	GRPC string
	HTTP string // empty when the HTTP endpoints are off (-http-addr '')
}

// WithListening calls fn once, with the addresses the host bound, as soon
// as it serves on them: how tests and wrappers that pass port 0 learn
// where to connect.
func WithListening(fn func(Addrs)) Option { return func(o *options) { o.listening = fn } }

func newOptions(opts []Option) *options {
	o := &options{name: filepath.Base(os.Args[0])}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// Main runs the host with the flags of os.Args until SIGINT or SIGTERM,
// then drains and shuts down gracefully (see Run) and exits: status 0
// after a clean shutdown (or -h), 2 on a mistake in the command line, 1 on
// any other error. A second signal ends a drain or a shutdown at once.
func Main(register RegisterFunc, opts ...Option) {
	daemon.Main(newOptions(opts).name, func(ctx context.Context) error {
		return Run(ctx, os.Args[1:], os.Stderr, register, opts...)
	})
}

// Run is Main without the process: it parses args (without the program
// name), writes its usage and logs to stderr, serves until ctx ends, then
// drains: /readyz fails and the gRPC health service reports NOT_SERVING,
// while everything is served as before for -drain-period. Then it shuts
// down: no new connections or RPCs are accepted, open WatchList
// streams end with Unavailable "server is shutting down" (clients re-watch
// elsewhere), and unary RPCs in flight get up to -shutdown-timeout to
// finish before the remaining connections are closed; connections held
// open only by streams whose clients do not read are closed as soon as no
// unary RPC is left. It returns nil after a clean shutdown, flag.ErrHelp
// for -h, and a UsageError for a mistake in args.
func Run(ctx context.Context, args []string, stderr io.Writer, register RegisterFunc, opts ...Option) error {
	o := newOptions(opts)
	f, err := parseFlags(o, args, stderr)
	if err != nil {
		return err
	}

	logOpts := &hclog.LoggerOptions{
		Name:       strings.Fields(o.name + " host")[0],
		Level:      hclog.LevelFromString(f.logLevel),
		Output:     stderr,
		JSONFormat: f.logJSON,
	}
	logger := hclog.New(logOpts)
	errs := &lastErrors{}
	if f.console.on {
		// The console shows each controller's last error: the host's
		// logger hands its error lines to errs.
		il := hclog.NewInterceptLogger(logOpts)
		il.RegisterSink(errs)
		logger = il
	}

	// The security files first: a missing or malformed one stops the host
	// before it touches storage, and it never serves without them.
	certExpiry := certExpiryGauge()
	reloadCtx, stopReload := context.WithCancel(ctx)
	defer stopReload()
	tlsOpt, err := tlsOption(reloadCtx, f, logger.Named("tls"), certExpiry)
	if err != nil {
		return err
	}
	acls, err := aclSource(f, logger.Named("acl"))
	if err != nil {
		return err
	}

	st, err := openStorage(ctx, f, logger)
	if err != nil {
		return err
	}
	defer st.close()
	backend, lease := st.backend, st.lease

	metrics := prometheus.NewRegistry()
	registry, svc, mgr, err := newService(f, backend, lease, acls, metrics, logger)
	if err != nil {
		return err
	}

	grpcMetrics := newGRPCMetrics()
	registerMetrics(metrics, grpcMetrics, certExpiry, st, logger)

	h := &Host{registry: registry, mgr: mgr, metrics: metrics, logger: logger, dev: f.dev}
	if !f.controllers {
		// The user's controllers register on a Manager that never runs:
		// they run in processes of their own (package remote).
		if h.mgr, err = controller.NewManager(server.NewInProcessClient(svc), nil); err != nil {
			return err
		}
	}
	if register != nil {
		if err := register(h); err != nil {
			return fmt.Errorf("registering types and controllers: %w", err)
		}
	}

	var serving atomic.Bool // for /readyz
	lis, err := listenGRPC(f)
	if err != nil {
		return err
	}
	warnPlaintextTokens(f, lis.Addr(), logger.Named("acl"))

	var hist *history.Service
	if _, on := f.history.limits(); on {
		hist = history.New(svc)
	}
	cc := consoleControllers{run: mgr, lease: lease, metrics: metrics, errors: errs}
	if !f.controllers {
		cc.remote = h.mgr
	}
	var ui http.Handler // nil: the console is off
	if c := newConsole(f, svc, hist, cc, logger.Named("console")); c != nil {
		defer c.Close()
		ui = c
	}
	httpSrv, err := listenHTTP(reloadCtx, f, metrics, readiness{serving: &serving, backend: backend, mgr: mgr}, ui, logger.Named("http"))
	if err != nil {
		lis.Close()
		return err
	}
	mustRegisterConnMetrics(metrics, lis, httpSrv)
	logConnLimits(f, logger)

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
	gs, healthSrv, closeAudit := newGRPCServer(f, svc, hist, acls, tlsOpt, grpcMetrics, metrics,
		endStreamsOnShutdown(shuttingDown), unary.intercept, logger)
	defer closeAudit()

	aclCtx, stopACL := context.WithCancel(context.Background())
	defer stopACL()
	if acls != nil {
		go acls.Run(aclCtx, f.reloadInterval)
	}

	serveErr := make(chan error, 1)
	serving.Store(true)
	go func() { serveErr <- gs.Serve(lis) }()
	if httpSrv != nil {
		httpSrv.Serve(logger.Named("http"))
		defer httpSrv.Stop(f.shutdownTimeout, logger.Named("http"))
	}

	logServing(f, registry, logger)
	addrs := Addrs{GRPC: lis.Addr().String()}
	logger.Info("gRPC server listening", "addr", addrs.GRPC)
	if httpSrv != nil {
		addrs.HTTP = httpSrv.Addr()
	}
	if o.listening != nil {
		o.listening(addrs)
	}

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		// Serve only returns early when the listener fails.
		return fmt.Errorf("serving gRPC: %w", err)
	}

	drain(f, &serving, healthSrv, logger)
	logger.Info("shutting down", "timeout", f.shutdownTimeout)
	svc.Shutdown()
	beginShutdown()
	stopGRPC(gs, &unary, f.shutdownTimeout, shutdownStreamGrace, logger)
	closeAudit() // the refusals not logged yet
	stopMgr()
	if err := <-mgrDone; err != nil {
		logger.Error("controller manager", "error", err)
	}
	if err := <-serveErr; err != nil {
		return fmt.Errorf("serving gRPC: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// openStorage opens the storage f names: the backend, the leader lease
// (nil: this server is always the leader) and what to close when the
// server has stopped.
func openStorage(ctx context.Context, f config, logger hclog.Logger) (*hostStorage, error) {
	if f.storage == "etcd" {
		return openEtcd(ctx, f.etcd, f.watchLogBytes, f.reloadInterval, logger, f.history.etcdOption())
	}
	return &hostStorage{
		backend:  inmem.New(inmem.WithWatchLogBytes(f.watchLogBytes), f.history.inmemOption()),
		election: inmemLease,
		close:    func() {},
	}, nil
}

// newService makes the ResourceService on backend with the host's types
// registered, and the Manager of the controllers that run in this process,
// the built-in ones registered (see builtin.New); the Manager follows lease
// when there is one, and reports to metrics.
func newService(f config, backend storage.Backend, lease leaderLease, acls *acl.Source, metrics *prometheus.Registry, logger hclog.Logger,
) (resource.Registry, *server.Server, *controller.Manager, error) {
	// The server reads the registry on every request, so the types the
	// user registers below are served. Every host serves loom.v1.Lease, on
	// which remote controller replicas elect their leader (package
	// leaderelection).
	registry := resource.NewRegistry()
	if err := leaderelection.RegisterTypes(registry); err != nil {
		return nil, nil, nil, err
	}
	svcCfg := server.Config{
		Backend:          backend,
		Registry:         registry,
		Logger:           logger.Named("resource"),
		MaxResourceBytes: f.maxResource,
		MaxListBytes:     f.maxListBytes,
		MaxLargeLists:    f.maxLargeLists,
	}
	if acls != nil {
		// Every network caller is checked; the host's own controllers
		// and reaper (in process, which no caller can pose as) are not.
		svcCfg.ACLResolver = server.TrustInProcess(acls.Resolve)
	}
	// The controllers run in this process and talk to the service directly.
	// A single in-memory server is always the leader; on etcd the servers
	// elect one. The server comes with its built-in controllers (the
	// reaper) registered on mgr.
	mgrOpts := []controller.ManagerOption{controller.WithMetrics(metrics)}
	if lease != nil {
		// A follower's cache is warm unless -warm-standby=false.
		mgrOpts = append(mgrOpts, controller.WithLease(lease), controller.WithWarmStandby(f.etcd.warmStandby))
	}
	svc, mgr, err := builtin.New(svcCfg, logger.Named("controller"), mgrOpts...)
	if err != nil {
		return nil, nil, nil, err
	}
	if acls != nil {
		// A reload ends the watches whose tokens it revoked or narrowed.
		acls.OnReload(svc.ReauthorizeWatches)
	}

	return registry, svc, mgr, nil
}

// newGRPCServer makes the gRPC server with the service's options, the
// interceptors (metrics, the shutdown's end of streams, the tracking of
// unary calls, and the audit with ACLs), the limits of f and TLS, and
// registers the ResourceService and the services beside it. closeAudit
// flushes the audit log.
func newGRPCServer(f config, svc *server.Server, hist *history.Service, acls *acl.Source, tlsOpt grpc.ServerOption, grpcMetrics *grpcprom.ServerMetrics,
	metrics *prometheus.Registry, endStreams grpc.StreamServerInterceptor, trackUnary grpc.UnaryServerInterceptor, logger hclog.Logger,
) (gs *grpc.Server, healthSrv *health.Server, closeAudit func()) {
	grpcOpts := append(svc.ServerOptions(),
		grpc.ChainStreamInterceptor(grpcMetrics.StreamServerInterceptor(), endStreams),
		grpc.ChainUnaryInterceptor(grpcMetrics.UnaryServerInterceptor(), trackUnary),
	)
	closeAudit = func() {}
	if acls != nil {
		audit := newAuditor(acls, logger.Named("audit"), metrics)
		closeAudit = audit.Close
		grpcOpts = append(grpcOpts, grpc.ChainUnaryInterceptor(audit.unary), grpc.ChainStreamInterceptor(audit.stream))
	}
	grpcOpts = append(grpcOpts, limitOptions(f)...)
	if tlsOpt != nil {
		grpcOpts = append(grpcOpts, tlsOpt)
	}
	gs = grpc.NewServer(grpcOpts...)
	svc.Register(gs)
	if hist != nil {
		// Off, the history service is not served at all: its clients get
		// Unimplemented, as from a server that has none (Consul's), rather
		// than an empty history they could take for the truth.
		hist.Register(gs)
	}
	bulk.New(svc, f.bulk.limits()).Register(gs)
	catalog.New(svc).Register(gs)
	healthSrv = health.NewServer()
	healthpb.RegisterHealthServer(gs, healthSrv)
	if f.reflection {
		var resolve func(context.Context) (resource.Authorizer, error)
		if acls != nil {
			resolve = acls.Resolve
		}
		registerReflection(gs, resolve)
	}
	grpcMetrics.InitializeMetrics(gs)
	return gs, healthSrv, closeAudit
}

// registerMetrics registers the process's, the build's, gRPC's, the
// certificates', the storage's and the leader lease's metrics.
func registerMetrics(metrics *prometheus.Registry, grpcMetrics *grpcprom.ServerMetrics, certExpiry *prometheus.GaugeVec, st *hostStorage, logger hclog.Logger) {
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics.MustRegister(grpcMetrics, daemon.BuildInfoCollector(daemon.ReadBuildInfo()), certExpiry)
	mustRegisterStorageMetrics(metrics, st.backend, logger)
	mustRegisterLeaderMetric(metrics, st.election, st.lease)
}

// logServing logs what the host serves once it listens.
func logServing(f config, registry resource.Registry, logger hclog.Logger) {
	if f.dev {
		logger.Info("development server: resources are kept in memory and lost on exit",
			"storage", f.storage, "types", typeNames(registry))
	} else {
		logger.Info("serving", "storage", f.storage, "types", typeNames(registry))
	}
	if !f.controllers {
		logger.Info("serving the types only: the controllers registered are not run (-controllers=false); the reaper runs")
	}
}

// drain makes /readyz and the health service tell load balancers and
// health-checking clients to go elsewhere while this server still serves
// everything, new connections included, for f's drain period; only then
// does the shutdown refuse new RPCs.
func drain(f config, serving *atomic.Bool, healthSrv *health.Server, logger hclog.Logger) {
	serving.Store(false)
	healthSrv.Shutdown()
	if f.drainPeriod > 0 {
		logger.Info("draining: serving on while /readyz fails", "period", f.drainPeriod)
		time.Sleep(f.drainPeriod)
	}
}

func typeNames(r resource.Registry) string {
	var names []string
	for _, reg := range r.Types() {
		names = append(names, resource.TypeString(reg.Type))
	}
	return strings.Join(names, ",")
}
