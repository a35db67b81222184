package remote

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/loomrt/loom/internal/daemon"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/dial"
	"github.com/loomrt/loom/leaderelection"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

const (
	// DefaultAddr is the server the process connects to unless -addr (or
	// $LOOM_ADDR) says otherwise: a host's default gRPC address.
	DefaultAddr = "127.0.0.1:8502"
	// DefaultHTTPAddr is where the HTTP endpoints listen unless -http-addr
	// says otherwise (a host's are on 8501).
	DefaultHTTPAddr = "127.0.0.1:8510"

	// EnvAddr and EnvToken are the environment variables -addr and the
	// token default to, as for the loom CLI.
	EnvAddr  = "LOOM_ADDR"
	EnvToken = "LOOM_TOKEN"

	// minLeaseTTL bounds -lease-ttl below: the renew deadline and retry
	// period are fractions of it.
	minLeaseTTL = time.Second
)

// UsageError is a mistake in the command line: Main exits with status 2
// on one.
type UsageError = daemon.UsageError

var usagef = daemon.Usagef

// config is what the command line says.
type config struct {
	addr                   string
	tlsCA, tlsCert, tlsKey string
	tokenFile              string
	leaderElect            bool
	leaseName, leaseNS     string
	leaseTTL               time.Duration
	leaseIdentity          string
	warmStandby            bool
	httpAddr               string
	httpTokenFile          string
	reloadInterval         time.Duration
	pprof                  bool
	logLevel               string
	logJSON                bool
	defaultedLeaseName     bool
}

func parseFlags(o *options, args []string, output io.Writer) (config, error) {
	var f config
	fs := flag.NewFlagSet(o.name, flag.ContinueOnError)
	fs.SetOutput(output)
	fs.Usage = func() {
		fmt.Fprintf(output, "Usage: %s [flags]\n\n", o.name)
		if o.description != "" {
			fmt.Fprintf(output, "%s\n\n", o.description)
		}
		fmt.Fprintf(output, "Runs controllers against a Loom server over gRPC (a host started with\n"+
			"-controllers=false serves their types). Its replicas elect a leader on a\n"+
			"loom.v1.Lease resource on the server: the leader runs the singleton\n"+
			"controllers, and on SIGTERM it stops them and releases the lease, so another\n"+
			"replica takes over at once. The followers keep their caches warm (unless\n"+
			"-warm-standby=false), so the one that wins the lease reconciles at once.\n"+
			"/readyz is ready once the cache is primed and the replica leads, or follows\n"+
			"warm and knows the leader; its \"leader:\" line says which.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	addr := os.Getenv(EnvAddr)
	if addr == "" {
		addr = DefaultAddr
	}
	fs.StringVar(&f.addr, "addr", addr, "`addresses` of the servers' gRPC ports, separated by commas: the process fails over between them ($"+EnvAddr+" sets the default)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "`file` of PEM CA certificates the server's certificate is verified against (turns TLS on; the system's roots when only -tls-cert is given); reloaded when it changes")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "`file` of the PEM client certificate to present (mutual TLS, with -tls-key; turns TLS on)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "`file` of the PEM private key of -tls-cert")
	fs.StringVar(&f.tokenFile, "token-file", "", "`file` holding the ACL token sent with every request (default: $"+EnvToken+"); read at start")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect a leader among the replicas: only the leader runs the singleton controllers (-leader-elect=false: this process always runs them; run one replica)")
	fs.StringVar(&f.leaseName, "lease-name", "", "`name` of the loom.v1.Lease resource the replicas elect on (default: the command name)")
	fs.StringVar(&f.leaseNS, "lease-namespace", "default", "`namespace` of the lease resource (partition default)")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", leaderelection.DefaultLeaseDuration,
		"how long a leader that stopped renewing keeps others waiting (the leader renews every 2/15 of it and gives up after 2/3 of it without a renewal); a leader that stops cleanly releases the lease at once")
	fs.StringVar(&f.leaseIdentity, "lease-identity", "", "this replica's identity in the lease, unique among the replicas (default: the host name and a random suffix)")
	fs.BoolVar(&f.warmStandby, "warm-standby", true,
		"while following, watch and cache every type the singleton controllers need, so that this replica reconciles from a current cache the moment it wins the lease; "+
			"costs each follower the memory of those types and their watch traffic. -warm-standby=false saves that: a follower watches those types only once it first wins the lease, "+
			"and primes them before reconciling (a take-over then waits for a full prime), and /readyz reports it not ready while it follows")
	fs.StringVar(&f.httpAddr, "http-addr", DefaultHTTPAddr, "`address` of the HTTP endpoints /metrics, /healthz and /readyz (port 0 picks a free port; empty turns them off)")
	fs.StringVar(&f.httpTokenFile, "http-token-file", "", "`file` holding a token that /metrics and /debug/pprof/ require as \"Authorization: Bearer <token>\" (/healthz and /readyz stay open); reloaded when it changes, checked every -reload-interval")
	fs.DurationVar(&f.reloadInterval, "reload-interval", daemon.DefaultReloadInterval, "how often -http-token-file is checked for changes")
	fs.BoolVar(&f.pprof, "pprof", false, "serve Go's profiler under /debug/pprof/ on -http-addr (keep that address private)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log `level`: trace, debug, info, warn or error")
	fs.BoolVar(&f.logJSON, "log-json", false, "write logs as JSON lines")
	for _, add := range o.flags {
		add(fs)
	}
	if err := daemon.Parse(fs, args); err != nil {
		return f, err
	}
	return f, f.check(o.name)
}

// check validates the flags and fills in the defaults that depend on
// others.
func (f *config) check(name string) error {
	if hclog.LevelFromString(f.logLevel) == hclog.NoLevel {
		return usagef("unknown -log-level %q (want trace, debug, info, warn or error)", f.logLevel)
	}
	if _, err := dial.SplitAddrs(f.addr); err != nil {
		return usagef("-addr: give the servers' gRPC addresses, separated by commas (%q has an empty one)", f.addr)
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usagef("-tls-cert and -tls-key go together")
	}
	if f.pprof && f.httpAddr == "" {
		return usagef("-pprof needs -http-addr")
	}
	if f.httpTokenFile != "" && f.httpAddr == "" {
		return usagef("-http-token-file needs -http-addr")
	}
	if f.reloadInterval <= 0 {
		return usagef("-reload-interval must be positive")
	}
	if !f.leaderElect {
		if !f.warmStandby {
			return usagef("-warm-standby=false is for followers: with -leader-elect=false this process always runs the singleton controllers, so it never follows")
		}
		return nil
	}
	if f.leaseName == "" {
		f.leaseName, f.defaultedLeaseName = name, true
	}
	if err := resource.ValidateName(f.leaseName); err != nil {
		if f.defaultedLeaseName {
			return usagef("-lease-name: the command name %q is not a valid resource name; give -lease-name", name)
		}
		return usagef("-lease-name: %v", err)
	}
	if err := resource.ValidateName(f.leaseNS); err != nil {
		return usagef("-lease-namespace: %v", err)
	}
	if f.leaseTTL < minLeaseTTL {
		return usagef("-lease-ttl must be at least %v", minLeaseTTL)
	}
	if f.leaseIdentity == "" {
		hostname, err := os.Hostname()
		if err != nil || hostname == "" {
			hostname = "replica"
		}
		f.leaseIdentity = hostname + "-" + strings.ToLower(resource.NewULID())
	}
	return nil
}

// dial connects to the server as the flags say, counting calls in m. TLS
// is on when any -tls-* flag is given; otherwise the connection is
// plaintext, and a token is sent in the clear (logged as a warning).
func (f config) dial(m *grpcprom.ClientMetrics, logger hclog.Logger) (*grpc.ClientConn, error) {
	token, err := f.token()
	if err != nil {
		return nil, err
	}
	opts := []dial.Option{dial.WithDialOptions(
		grpc.WithChainUnaryInterceptor(m.UnaryClientInterceptor()),
		grpc.WithChainStreamInterceptor(m.StreamClientInterceptor()),
	)}
	if f.tlsCA != "" || f.tlsCert != "" {
		opts = append(opts, dial.WithTLS(certs.Files{CA: f.tlsCA, Cert: f.tlsCert, Key: f.tlsKey}))
	} else {
		opts = append(opts, dial.WithInsecure())
		if token != "" {
			logger.Warn("sending the ACL token over plaintext: give -tls-ca to connect over TLS", "server", f.addr)
		}
	}
	if token != "" {
		opts = append(opts, dial.WithToken(token))
	}
	conn, err := dial.Dial(f.addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", f.addr, err)
	}
	return conn, nil
}

// token reads -token-file, or $LOOM_TOKEN without it.
func (f config) token() (string, error) {
	if f.tokenFile == "" {
		return os.Getenv(EnvToken), nil
	}
	return daemon.ReadToken("token-file", f.tokenFile)
}

// newLease returns the Elector the flags describe. The renew deadline and
// retry period keep client-go's proportions (15 s, 10 s, 2 s).
func (f config) newLease(client pbresource.ResourceServiceClient, logger hclog.Logger) (*leaderelection.Elector, error) {
	id := &pbresource.ID{
		Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: f.leaseNS},
		Name:    f.leaseName,
	}
	return leaderelection.New(client, id, f.leaseIdentity,
		leaderelection.WithLeaseDuration(f.leaseTTL),
		leaderelection.WithRenewDeadline(f.leaseTTL*2/3),
		leaderelection.WithRetryPeriod(f.leaseTTL*2/15),
		leaderelection.WithLogger(logger))
}
