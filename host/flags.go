package host

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/loomrt/loom/internal/daemon"

	"github.com/hashicorp/go-hclog"

	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/inmem"
)

const (
	// DefaultGRPCAddr is where the gRPC server listens unless -grpc-addr
	// says otherwise. It is also Consul's gRPC port: pick another one
	// (-grpc-addr) to run beside a Consul agent.
	DefaultGRPCAddr = "127.0.0.1:8502"
	// DefaultHTTPAddr is where the HTTP endpoints listen unless -http-addr
	// says otherwise.
	DefaultHTTPAddr        = "127.0.0.1:8501"
	defaultShutdownTimeout = 10 * time.Second
	// defaultDrainPeriod is how long a host that was told to stop goes on
	// serving with /readyz failing, unless -drain-period says otherwise
	// (-dev: 0). It covers a load balancer that probes every few seconds
	// noticing the 503, and a Kubernetes endpoint removal reaching the
	// proxies, so that no new request is sent to a closed listener.
	defaultDrainPeriod = 5 * time.Second

	// defaultHandshakeTimeout bounds a new connection's handshakes (gRPC's
	// own default, 120 s, lets idle TCP connections that never speak
	// HTTP/2 pile up).
	defaultHandshakeTimeout = 10 * time.Second
	// defaultMaxStreams is the concurrent streams per connection, as in
	// Consul's agent.
	defaultMaxStreams = 2048
	// recvMsgHeadroom is what the largest gRPC message received has above
	// -max-resource-bytes unless -max-recv-msg-bytes says otherwise: room
	// for a Write's other fields, so that any resource the server would
	// store arrives whole.
	recvMsgHeadroom = 64 << 10
	// defaultKeepaliveMinTime is how often, at most, a client may ping, as
	// in Consul's agent (gRPC's own default, 5 minutes, makes clients that
	// ping every 30 s lose their connection).
	defaultKeepaliveMinTime = 15 * time.Second
	// defaultKeepaliveTime is how long a connection may be silent before
	// the server pings it to learn whether the client is still there (gRPC's
	// own default is 2 hours, during which a vanished client's watches stay
	// open); keepaliveTimeout is how long it waits for the answer.
	defaultKeepaliveTime = time.Minute
	keepaliveTimeout     = 20 * time.Second
	// defaultMaxConnIdle is how long a connection with no call or watch
	// open is kept.
	defaultMaxConnIdle = 5 * time.Minute

	// shutdownStreamGrace is how long streams get, once shutdown begins,
	// to deliver their final status before the connections still open are
	// closed (as soon as no unary RPC is running). A client that reads
	// needs far less; one that has stopped reading never takes it (see
	// stopGRPC).
	shutdownStreamGrace = 500 * time.Millisecond
)

// UsageError is a mistake in the command line: Main exits with status 2
// on one.
type UsageError = daemon.UsageError

var usagef = daemon.Usagef

// config is what the command line says.
type config struct {
	dev             bool
	controllers     bool
	grpcAddr        string
	storage         string
	logLevel        string
	logJSON         bool
	shutdownTimeout time.Duration
	drainPeriod     time.Duration
	maxResource     int
	maxListBytes    int
	maxLargeLists   int
	watchLogBytes   int64
	reflection      bool
	etcd            etcdFlags
	history         historyFlags
	bulk            bulkFlags
	console         consoleFlags

	tlsCert, tlsKey, tlsClientCA string
	aclFile                      string
	reloadInterval               time.Duration
	httpAddr                     string
	pprof                        bool
	httpTLS                      bool
	httpTokenFile                string

	handshakeTimeout time.Duration
	maxStreams       uint
	maxRecvMsg       int
	keepaliveMinTime time.Duration
	keepaliveTime    time.Duration
	maxConnIdle      time.Duration
	maxConns         int
	maxHTTPConns     int
}

func parseFlags(o *options, args []string, output io.Writer) (config, error) {
	var f config
	fs := flag.NewFlagSet(o.name, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(output, "Usage: %s -dev [flags]\n"+
			"       %s -storage etcd -etcd-endpoints host:port,... [flags]\n\n", o.name, o.name)
		if o.description != "" {
			fmt.Fprintf(output, "%s\n\n", o.description)
		}
		fmt.Fprintf(output, "Serves the ResourceService over gRPC (with server reflection, so grpcurl\n"+
			"needs no protoset, unless -reflection=false) and the gRPC health service,\n"+
			"and runs the controllers with the built-in tombstone reaper.\n\n"+
			"-dev keeps resources in memory (they are gone when the server stops); the\n"+
			"server is always the leader.\n\n"+
			"-storage etcd keeps them in an etcd cluster that several servers share.\n"+
			"Every server serves the API; the servers elect a leader through etcd\n"+
			"(-lease-ttl), and only the leader runs the controllers, fencing its writes\n"+
			"so a deposed leader's late writes are refused. The others keep the\n"+
			"controllers' caches warm (unless -warm-standby=false), so one takes over\n"+
			"at once when the lease is free; /readyz says which leads (\"leader:\").\n"+
			"The password may be given in the environment variable %s\n"+
			"instead of -etcd-password.\n\nFlags:\n", etcdPasswordEnv)
		fs.PrintDefaults()
	}
	fs.BoolVar(&f.dev, "dev", false, "run a development server: in-memory storage")
	fs.BoolVar(&f.controllers, "controllers", true,
		"run the controllers this host registers; -controllers=false serves their types only, for controllers that run in processes of their own (package remote); the built-in reaper runs either way")
	fs.StringVar(&f.grpcAddr, "grpc-addr", DefaultGRPCAddr, "`address` the gRPC server listens on (port 0 picks a free port; 8502 is also Consul's gRPC port)")
	fs.StringVar(&f.storage, "storage", "inmem", "storage `backend`: inmem (with -dev) or etcd")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `level`: trace, debug, info, warn or error")
	fs.BoolVar(&f.logJSON, "log-json", false, "write logs as JSON lines")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", defaultShutdownTimeout,
		"how long to let in-flight unary requests finish on SIGINT/SIGTERM before closing connections (open watches end at once)")
	fs.DurationVar(&f.drainPeriod, "drain-period", defaultDrainPeriod,
		"how long to go on serving on SIGINT/SIGTERM, with /readyz failing and gRPC health NOT_SERVING, before refusing new requests, so load balancers move clients elsewhere first (default with -dev: 0, no drain)")
	fs.IntVar(&f.maxResource, "max-resource-bytes", server.DefaultMaxResourceBytes,
		"largest resource the server stores, in `bytes` of its encoding; keep it under the clients' gRPC message limit (4 MiB by default) and etcd's --max-request-bytes (1.5 MiB by default)")
	fs.IntVar(&f.maxListBytes, "max-list-bytes", server.DefaultMaxListBytes,
		"largest List or ListByOwner answer, in `bytes` of its encoding: an unpaged one that would be larger is refused (ResourceExhausted, telling the client to page with page_size), a page ends early")
	fs.IntVar(&f.maxLargeLists, "max-large-lists", server.DefaultMaxLargeLists,
		"most Lists with answers over 4 MiB built at once; another waits up to 1s, then is refused (ResourceExhausted)")
	fs.BoolVar(&f.reflection, "reflection", true, "serve gRPC server reflection (-reflection=false turns it off); with -acl-file, only to tokens with a {capability: reflection} rule")
	fs.Int64Var(&f.watchLogBytes, "watch-log-bytes", inmem.DefaultWatchLogBytes,
		"`bytes` of recent changes the store keeps for its watches (with -storage etcd: the decoded changes of the server's one etcd watch): a watch further behind is ended (Aborted); a resume from further back gets a fresh snapshot (in-memory) or catches up from etcd's history")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "`file` of the PEM certificate the gRPC server presents (with -tls-key; turns TLS on; reloaded when it changes)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "`file` of the PEM private key of -tls-cert")
	fs.StringVar(&f.tlsClientCA, "tls-client-ca", "", "`file` of PEM CA certificates: clients must present a certificate they signed (mutual TLS; needs -tls-cert)")
	fs.DurationVar(&f.reloadInterval, "reload-interval", daemon.DefaultReloadInterval,
		"how often the -acl-file, -tls-*, -etcd-ca/-etcd-cert/-etcd-key and -http-token-file files are checked for changes (the ACL file is also reloaded on SIGHUP)")
	fs.StringVar(&f.aclFile, "acl-file", "", "ACL `file` (YAML or JSON) mapping tokens to rules: turns ACLs on, denying whatever it does not allow; reloaded on SIGHUP and when it changes")
	fs.StringVar(&f.httpAddr, "http-addr", DefaultHTTPAddr, "`address` of the HTTP endpoints /metrics, /healthz and /readyz (empty turns them off)")
	fs.BoolVar(&f.pprof, "pprof", false, "serve Go's profiler under /debug/pprof/ on -http-addr (keep that address private)")
	fs.BoolVar(&f.httpTLS, "http-tls", false, "serve the HTTP endpoints over TLS with -tls-cert and -tls-key (reloaded as for gRPC; no client certificate is asked for, so probes need none)")
	fs.StringVar(&f.httpTokenFile, "http-token-file", "", "`file` holding a token that /metrics and /debug/pprof/ require as \"Authorization: Bearer <token>\" (/healthz and /readyz stay open); reloaded when it changes, checked every -reload-interval")
	fs.DurationVar(&f.handshakeTimeout, "handshake-timeout", defaultHandshakeTimeout,
		"how long a new gRPC connection may take to complete its TLS and HTTP/2 handshakes before it is closed")
	fs.UintVar(&f.maxStreams, "max-streams-per-conn", defaultMaxStreams,
		"most concurrent gRPC streams (calls and watches) one connection may have open; a client waits for one to end before opening another")
	fs.IntVar(&f.maxRecvMsg, "max-recv-msg-bytes", server.DefaultMaxResourceBytes+recvMsgHeadroom,
		"largest gRPC message the server accepts, in `bytes`; a larger one is refused with ResourceExhausted (default: -max-resource-bytes plus 64 KiB)")
	fs.DurationVar(&f.keepaliveMinTime, "keepalive-min-time", defaultKeepaliveMinTime,
		"shortest interval at which a client may send keepalive pings, with or without calls open; a client that pings more often is disconnected")
	fs.DurationVar(&f.keepaliveTime, "keepalive-time", defaultKeepaliveTime,
		"how long a connection may be silent before the server pings the client, closing the connection (and its watches) when no answer comes within 20s (at least 1s)")
	fs.DurationVar(&f.maxConnIdle, "max-conn-idle", defaultMaxConnIdle,
		"how long a connection with no call or watch open is kept before the server closes it (clients reconnect when they next call)")
	fs.IntVar(&f.maxConns, "max-conns", defaultMaxConns(fdLimit(), daemon.DefaultMaxHTTPConns),
		"most gRPC connections open at a time: a new one beyond it is closed at once (loom_connections_refused_total) while those open keep working (default: the limit on open files, less -max-http-conns, less 128 and a 16th of the limit for storage and files)")
	fs.IntVar(&f.maxHTTPConns, "max-http-conns", daemon.DefaultMaxHTTPConns,
		"most connections the HTTP endpoints hold open at a time: a new one beyond it takes the place of the longest-idle keep-alive, or is closed at once when none is idle")
	f.etcd.register(fs)
	f.history.register(fs)
	f.bulk.register(fs)
	f.console.register(fs)
	for _, add := range o.flags {
		add(fs)
	}
	if err := daemon.Parse(fs, args); err != nil {
		return f, err
	}
	if hclog.LevelFromString(f.logLevel) == hclog.NoLevel {
		return f, usagef("unknown -log-level %q (want trace, debug, info, warn or error)", f.logLevel)
	}
	if f.shutdownTimeout <= 0 {
		return f, usagef("-shutdown-timeout must be positive")
	}
	if f.drainPeriod < 0 {
		return f, usagef("-drain-period must not be negative")
	}
	if f.dev && !isSet(fs, "drain-period") {
		f.drainPeriod = 0 // Ctrl-C stops a development server at once
	}
	if f.maxResource <= 0 {
		return f, usagef("-max-resource-bytes must be positive")
	}
	if f.maxListBytes <= 0 || f.maxLargeLists <= 0 {
		return f, usagef("-max-list-bytes and -max-large-lists must be positive")
	}
	if f.watchLogBytes <= 0 {
		return f, usagef("-watch-log-bytes must be positive")
	}
	if f.reloadInterval <= 0 {
		return f, usagef("-reload-interval must be positive")
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return f, usagef("-tls-cert and -tls-key go together")
	}
	if f.tlsClientCA != "" && f.tlsCert == "" {
		return f, usagef("-tls-client-ca needs -tls-cert and -tls-key (mutual TLS is TLS first)")
	}
	if err := checkLimits(fs, &f); err != nil {
		return f, err
	}
	if err := f.bulk.check(); err != nil {
		return f, err
	}
	if err := f.history.check(); err != nil {
		return f, err
	}
	if f.pprof && f.httpAddr == "" {
		return f, usagef("-pprof needs -http-addr")
	}
	if (f.httpTLS || f.httpTokenFile != "") && f.httpAddr == "" {
		return f, usagef("-http-tls and -http-token-file need -http-addr")
	}
	if f.httpTLS && f.tlsCert == "" {
		return f, usagef("-http-tls serves the certificate of -tls-cert and -tls-key: give them")
	}
	if err := f.console.check(fs, &f); err != nil {
		return f, err
	}
	switch f.storage {
	case "inmem":
		if set := etcdFlagsSet(fs); set == "warm-standby" {
			return f, usagef("-warm-standby is for -storage etcd: on in-memory storage the server always leads, so it never stands by")
		} else if set != "" {
			return f, usagef("-%s is for -storage etcd", set)
		}
		if !f.dev {
			return f, usagef("in-memory storage is for the development server: "+
				"run '%s -dev', or '%s -storage etcd -etcd-endpoints ...' to keep resources in etcd", o.name, o.name)
		}
	case "etcd":
		if f.dev {
			return f, usagef("-dev runs on in-memory storage; leave it out with -storage etcd")
		}
		if err := f.etcd.check(); err != nil {
			return f, err
		}
	default:
		return f, usagef("unknown -storage %q (want inmem or etcd)", f.storage)
	}
	return f, nil
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
