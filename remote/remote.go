// Package remote runs controllers in a process of their own, against a Loom
// server over the network: the counterpart of host.Main for controllers
// whose types a host serves (start that host with -controllers=false). A
// controller author's main is a few lines:
//
//	func main() {
//		remote.Main(func(p *remote.Process) error {
//			return mycontroller.Register(p.Manager())
//		})
//	}
//
// The process owns its command line (run the binary with -h for the
// flags): the server's address (-addr), TLS (-tls-ca, and -tls-cert with
// -tls-key for mutual TLS) and an ACL token (-token-file, or $LOOM_TOKEN);
// leader election among its replicas (on by default: -leader-elect,
// -lease-name, -lease-namespace, -lease-ttl, -lease-identity), on a
// loom.v1.Lease resource on the server (package leaderelection), with warm
// followers (-warm-standby, on by default: see controller.WithWarmStandby); HTTP
// endpoints (-http-addr: /metrics with the Go, process, gRPC client and
// controller metrics, /healthz, /readyz; -pprof); logging (-log-level,
// -log-json).
//
// /readyz is ready once the Manager's cache is primed and, with leader
// election on, this replica leads, or follows warm and knows the leader: a
// warm follower takes over at once. A cold follower (-warm-standby=false)
// is not ready: it would have to prime the singleton controllers' types
// before reconciling. With leader election on, /readyz has a line
// "leader: leading", "leader: following (warm)" or "leader: following
// (cold)" (controller.LeaderState), ready or not. On SIGINT or SIGTERM the
// controllers stop first, then the lease is released, so another replica
// takes over at once rather than after the lease expires.
package remote

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/loomrt/loom/internal/connlimit"
	"github.com/loomrt/loom/internal/daemon"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/leaderelection"
	"github.com/loomrt/loom/proto/pbresource"
)

// Process is a running controller process as its registration function
// sees it: where to register controllers before they run.
type Process struct {
	mgr     *controller.Manager
	client  pbresource.ResourceServiceClient
	metrics prometheus.Registerer
	logger  hclog.Logger
}

// Manager returns the controller Manager; register your controllers on it.
// With leader election on, its singleton controllers run only on the
// replica that holds the lease.
func (p *Process) Manager() *controller.Manager { return p.mgr }

// Client returns the connection to the server, for what the controllers
// need besides the Manager.
func (p *Process) Client() pbresource.ResourceServiceClient { return p.client }

// Metrics returns where to register the user's own Prometheus metrics:
// they are served on /metrics beside the process's.
func (p *Process) Metrics() prometheus.Registerer { return p.metrics }

// Logger returns the process's logger, for the user's controllers.
func (p *Process) Logger() hclog.Logger { return p.logger }

// RegisterFunc registers a process's controllers. An error stops the
// process before it connects.
type RegisterFunc func(*Process) error

// Option configures Main and Run.
type Option func(*options)

type options struct {
	name        string
	description string
	flags       []func(*flag.FlagSet)
	listening   func(Addrs)
}

// WithName sets the command name shown in usage and messages (default:
// the program's file name). It is also the default lease name.
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithDescription sets a paragraph describing the process, shown by -h.
func WithDescription(text string) Option { return func(o *options) { o.description = text } }

// WithFlags lets a process define flags of its own: add is called with the
// process's flag set before the command line is parsed, so the values the
// flags point at are set when the RegisterFunc runs. Names the process
// already defines panic, as with any flag.FlagSet.
func WithFlags(add func(*flag.FlagSet)) Option {
	return func(o *options) { o.flags = append(o.flags, add) }
}

// Addrs are the addresses a process listens on, as host:port: the port
// the system chose when -http-addr asked for port 0.
type Addrs struct {
	HTTP string // empty when the HTTP endpoints are off (-http-addr '')
}

// WithListening calls fn once, with the addresses the process bound, as
// soon as it serves on them: how tests and wrappers that pass port 0 learn
// where to connect.
func WithListening(fn func(Addrs)) Option { return func(o *options) { o.listening = fn } }

func newOptions(opts []Option) *options {
	o := &options{name: filepath.Base(os.Args[0])}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// Main runs the process with the flags of os.Args until SIGINT or SIGTERM,
// then stops gracefully (see Run) and exits: status 0 after a clean stop
// (or -h), 2 on a mistake in the command line, 1 on any other error. A
// second signal ends a stop that takes too long.
func Main(register RegisterFunc, opts ...Option) {
	daemon.Main(newOptions(opts).name, func(ctx context.Context) error {
		return Run(ctx, os.Args[1:], os.Stderr, register, opts...)
	})
}

// Run is Main without the process: it parses args (without the program
// name), writes its usage and logs to stderr, and runs the controllers
// until ctx ends. Then it stops them (their contexts end and their
// reconciles return), and only then releases the leader lease, so that
// another replica takes over at once without overlap. It returns nil after
// a clean stop, flag.ErrHelp for -h, a UsageError for a mistake in args,
// and an error when the server refuses the lease type (Consul: run with
// -leader-elect=false and one replica).
func Run(ctx context.Context, args []string, stderr io.Writer, register RegisterFunc, opts ...Option) error {
	o := newOptions(opts)
	f, err := parseFlags(o, args, stderr)
	if err != nil {
		return err
	}
	logger := hclog.New(&hclog.LoggerOptions{
		Name:       o.name,
		Level:      hclog.LevelFromString(f.logLevel),
		Output:     stderr,
		JSONFormat: f.logJSON,
	})

	metrics := prometheus.NewRegistry()
	grpcMetrics := grpcprom.NewClientMetrics()
	metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), grpcMetrics,
		daemon.BuildInfoCollector(daemon.ReadBuildInfo()))
	conn, err := f.dial(grpcMetrics, logger)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := pbresource.NewResourceServiceClient(conn)

	mgrOpts := []controller.ManagerOption{controller.WithMetrics(metrics), controller.WithWarmStandby(f.warmStandby)}
	var lease *leaderelection.Elector
	if f.leaderElect {
		if lease, err = f.newLease(client, logger.Named("lease")); err != nil {
			return err
		}
		metrics.MustRegister(daemon.LeaderCollector(f.leaseName, lease.Held))
		mgrOpts = append(mgrOpts, controller.WithLease(lease))
	}
	mgr, err := controller.NewManager(client, logger.Named("controller"), mgrOpts...)
	if err != nil {
		return err
	}
	if register != nil {
		p := &Process{mgr: mgr, client: client, metrics: metrics, logger: logger}
		if err := register(p); err != nil {
			return fmt.Errorf("registering controllers: %w", err)
		}
	}
	if lease == nil {
		mgr.SetLeader(true)
	}

	pr := &parts{logger: logger, mgr: mgr, lease: lease, ready: &readiness{mgr: mgr, lease: lease}}
	reloadCtx, stopReload := context.WithCancel(ctx)
	defer stopReload()
	if pr.http, err = listenHTTP(reloadCtx, f, metrics, pr.ready, logger.Named("http")); err != nil {
		return err
	}
	if pr.http != nil {
		metrics.MustRegister(connlimit.Collector{"http": pr.http.Conns()})
	}
	return pr.run(ctx, o, f)
}

// parts are what Run assembled.
type parts struct {
	logger hclog.Logger
	mgr    *controller.Manager
	lease  *leaderelection.Elector // nil without leader election
	ready  *readiness
	http   *daemon.HTTPServer // nil without -http-addr
}

// run runs the Manager and the election until ctx ends (or the election
// fails), then stops them in that order.
func (pr *parts) run(ctx context.Context, o *options, f config) error {
	logger, mgr, lease, httpSrv := pr.logger, pr.mgr, pr.lease, pr.http
	var electionDone chan error // nil without election: never receives
	electionCtx, stopElection := context.WithCancel(context.Background())
	defer stopElection()
	if lease != nil {
		electionDone = make(chan error, 1)
		go func() { electionDone <- lease.Run(electionCtx) }()
	}
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	defer stopMgr()
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Run(mgrCtx) }()

	var addrs Addrs
	if httpSrv != nil {
		addrs.HTTP = httpSrv.Addr()
		httpSrv.Serve(logger.Named("http"))
		defer httpSrv.Stop(httpStopTimeout, logger.Named("http"))
	}
	if f.leaderElect {
		logger.Info("running", "server", f.addr, "lease", f.leaseName, "identity", f.leaseIdentity)
	} else {
		logger.Info("running without leader election", "server", f.addr)
	}
	if o.listening != nil {
		o.listening(addrs)
	}

	var err error
	select {
	case <-ctx.Done():
	case err = <-electionDone:
		// Run returns early only when the server refuses the lease type.
	}
	logger.Info("stopping the controllers")
	pr.ready.stopping.Store(true)
	stopMgr()
	if merr := <-mgrDone; merr != nil {
		logger.Error("controller manager", "error", merr)
	}
	if lease != nil && err == nil {
		stopElection() // releases the lease, now that no singleton runs
		err = <-electionDone
	}
	if err != nil {
		return err
	}
	logger.Info("stopped")
	return nil
}
