package host

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/storage"
	loometcd "github.com/loomrt/loom/storage/etcd"
)

const (
	defaultEtcdPrefix = loometcd.DefaultPrefix
	defaultLeaseTTL   = 10 * time.Second
	// etcdPasswordEnv may hold the etcd password, which is better kept out
	// of the command line (other users can read it in the process list).
	etcdPasswordEnv = "LOOM_ETCD_PASSWORD"
	// etcdDialTimeout bounds connecting to etcd, and the check at start-up
	// that it answers.
	etcdDialTimeout = 10 * time.Second
	// leaderKeySuffix follows the key prefix in the election key. The
	// backend's keys live under <prefix>/r/ and <prefix>/o/, so the two never
	// meet.
	leaderKeySuffix = "/leader"
)

// etcdFlags are the flags of -storage etcd.
type etcdFlags struct {
	endpoints string
	prefix    string
	ca        string
	cert      string
	key       string
	username  string
	password  string
	leaseTTL  time.Duration
	nodeName  string
	// warmStandby keeps a follower's cache warm (controller.WithWarmStandby).
	warmStandby bool
	// callTimeout bounds each request to etcd (etcd.WithCallTimeout).
	callTimeout time.Duration
}

// etcdFlagNames are the flags that only make sense with -storage etcd.
var etcdFlagNames = []string{
	"etcd-endpoints", "etcd-prefix", "etcd-ca", "etcd-cert", "etcd-key",
	"etcd-username", "etcd-password", "lease-ttl", "node-name", "etcd-call-timeout",
	"warm-standby",
}

func (f *etcdFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoints, "etcd-endpoints", "",
		"comma-separated etcd client `endpoints` (host:port, or https://host:port), for -storage etcd")
	fs.StringVar(&f.prefix, "etcd-prefix", defaultEtcdPrefix,
		"etcd key `prefix` of this Loom store; servers sharing a store use the same prefix")
	fs.StringVar(&f.ca, "etcd-ca", "", "`file` of PEM CA certificates to verify etcd's server certificate (enables TLS; reloaded when it changes, checked every -reload-interval)")
	fs.StringVar(&f.cert, "etcd-cert", "", "`file` with the PEM client certificate for etcd (with -etcd-key; enables TLS; reloaded when it changes, checked every -reload-interval)")
	fs.StringVar(&f.key, "etcd-key", "", "`file` with the PEM private key of -etcd-cert")
	fs.StringVar(&f.username, "etcd-username", "", "etcd `user` name, when etcd has authentication on")
	fs.StringVar(&f.password, "etcd-password", "", "etcd `password` of -etcd-username (or set "+etcdPasswordEnv+")")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", defaultLeaseTTL,
		"`TTL` of the leader lease: how long the servers wait for a leader that vanished "+
			"(whole seconds, at least 1s)")
	fs.BoolVar(&f.warmStandby, "warm-standby", true,
		"while another server leads, watch and cache every type the controllers need, so that this server reconciles from a current cache "+
			"the moment it wins the lease (failover in about -lease-ttl); costs each follower the memory of those types and their watch traffic. "+
			"-warm-standby=false saves that: a follower watches those types only once it first wins the lease, and primes them before reconciling")
	fs.DurationVar(&f.callTimeout, "etcd-call-timeout", loometcd.DefaultCallTimeout,
		"how long the server waits for etcd to answer one request of a read or a write; past it, or ahead of the client's deadline, "+
			"a read fails with Unavailable and a write with Unavailable \"outcome unknown\"")
	fs.StringVar(&f.nodeName, "node-name", "",
		"`name` of this server, stored in the leader key and shown in logs (default: host name and process id)")
}

// etcdFlagsSet returns the name of an etcd flag given on the command line,
// or "".
func etcdFlagsSet(fs *flag.FlagSet) string {
	var set string
	fs.Visit(func(fl *flag.Flag) {
		for _, name := range etcdFlagNames {
			if fl.Name == name && set == "" {
				set = name
			}
		}
	})
	return set
}

// check validates the flags of -storage etcd and fills in defaults.
func (f *etcdFlags) check() error {
	if len(f.endpointList()) == 0 {
		return usagef("-storage etcd needs -etcd-endpoints (e.g. 127.0.0.1:2379)")
	}
	if (f.cert == "") != (f.key == "") {
		return usagef("-etcd-cert and -etcd-key go together")
	}
	if f.password == "" {
		f.password = os.Getenv(etcdPasswordEnv)
	}
	if f.password != "" && f.username == "" {
		return usagef("an etcd password needs -etcd-username")
	}
	if f.leaseTTL < time.Second {
		return usagef("-lease-ttl must be at least 1s (etcd counts lease TTLs in whole seconds)")
	}
	if f.leaseTTL%time.Second != 0 {
		return usagef("-lease-ttl %s is not a whole number of seconds", f.leaseTTL)
	}
	if f.callTimeout <= 0 {
		return usagef("-etcd-call-timeout must be positive")
	}
	if f.nodeName == "" {
		host, _ := os.Hostname()
		f.nodeName = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	return nil
}

func (f *etcdFlags) endpointList() []string {
	var out []string
	for _, e := range strings.Split(f.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// leaderLease is what the host needs of a leader lease: the Manager's
// Lease, with the fencing token for the logs.
type leaderLease interface {
	controller.Lease
	controller.Fencer
}

// hostStorage is an open store: the backend, the leader lease (nil in
// memory: the server is always the leader), and
// close, which resigns leadership (call it after the controllers stopped)
// and closes the client.
type hostStorage struct {
	backend  storage.Backend
	lease    leaderLease
	election string // the election key, which names the lease in loom_leader
	close    func()
}

// openEtcd connects to etcd, checks that it answers, and starts
// campaigning for leadership; opts add to the backend's options.
func openEtcd(ctx context.Context, f etcdFlags, watchLogBytes int64, reload time.Duration, logger hclog.Logger, opts ...loometcd.Option) (*hostStorage, error) {
	// The TLS files are checked until the client is closed.
	reloadCtx, stopReload := context.WithCancel(context.Background())
	tlsCfg, err := f.tlsConfig(reloadCtx, reload, logger.Named("tls"))
	if err != nil {
		stopReload()
		return nil, err
	}
	endpoints := f.endpointList()
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: etcdDialTimeout,
		TLS:         tlsCfg,
		Username:    f.username,
		Password:    f.password,
		// Loom logs what matters about etcd itself (see the backend and
		// lease loggers); the client's own log is retry chatter.
		Logger: zap.NewNop(),
	})
	if err != nil {
		stopReload()
		return nil, fmt.Errorf("connecting to etcd at %s: %w", strings.Join(endpoints, ","), err)
	}
	closeClient := func() {
		client.Close()
		stopReload()
	}
	// Fail fast when etcd is unreachable or refuses us, rather than serve
	// errors: one linearizable read needs a quorum and the credentials.
	checkCtx, cancel := context.WithTimeout(ctx, etcdDialTimeout)
	_, err = client.Get(checkCtx, f.prefix+leaderKeySuffix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		closeClient()
		return nil, fmt.Errorf("etcd at %s does not answer: %w", strings.Join(endpoints, ","), err)
	}

	backend := loometcd.New(client, append([]loometcd.Option{loometcd.WithPrefix(f.prefix), loometcd.WithWatchLogBytes(watchLogBytes),
		loometcd.WithLogger(logger.Named("etcd")), loometcd.WithCallTimeout(f.callTimeout)}, opts...)...)
	// Refuse a store with a newer layout or one that went back in time
	// (a restore without a revision bump) before serving it.
	stopMark, err := backend.Start(ctx)
	if err != nil {
		closeClient()
		return nil, err
	}
	leaseCtx, stopLease := context.WithCancel(context.Background())
	electionKey := backend.ElectionKey() // the backend accepts fences of its elections only
	lease, err := loometcd.NewLease(leaseCtx, client, electionKey, f.leaseTTL,
		loometcd.WithLeaseValue(f.nodeName), loometcd.WithLeaseLogger(logger.Named("lease")))
	if err != nil {
		stopLease()
		stopMark()
		closeClient()
		return nil, err
	}
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		logLeadership(leaseCtx, lease, logger.Named("leader"))
	}()
	logger.Info("storage: etcd", "endpoints", strings.Join(endpoints, ","), "prefix", f.prefix,
		"election", electionKey, "lease_ttl", f.leaseTTL, "node", f.nodeName, "tls", tlsCfg != nil,
		"call_timeout", f.callTimeout)

	return &hostStorage{
		backend:  backend,
		lease:    lease,
		election: electionKey,
		close: func() {
			// Resign, so another server takes over at once instead of
			// after the TTL; then let go of etcd.
			stopLease()
			select {
			case <-lease.Done():
			case <-time.After(f.leaseTTL):
				logger.Warn("leader lease did not resign in time; the others wait for its TTL")
			}
			<-logDone
			stopMark() // records the high-water mark once more
			closeClient()
		},
	}, nil
}

// logLeadership logs every change of leadership, with the term: the
// revision of the leader key, which grows with each election, so terms
// order the leaders of a cluster. Until ctx ends.
func logLeadership(ctx context.Context, l leaderLease, logger hclog.Logger) {
	var term int64 // 0: not leading
	for {
		changed := l.Changed()
		_, rev, held := l.Fence()
		if !held {
			rev = 0
		}
		if rev != term {
			if term != 0 {
				logger.Info("lost leadership", "term", term)
			}
			if rev != 0 {
				logger.Info("became leader", "term", rev)
			}
			term = rev
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if term != 0 {
				logger.Info("lost leadership", "term", term, "reason", "shutting down")
			}
			return
		}
	}
}
