package etcd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// One embedded etcd serves every test and benchmark of the package; each
// test works under a key prefix of its own (newPrefix), so they can share it
// and run in parallel.
//
// The etcd server runs in a child process: the test binary started again
// with serverEnv set, which makes TestMain serve etcd instead of running
// tests. In its own process the server does not share the tests' heap and
// garbage collector, as in a real deployment, which keeps the W9
// benchmark's client-side comparison fair; and a test that fails hard
// cannot leave it half stopped. The child stops when its standard input
// closes, that is when the parent exits, however it exits.
var (
	testEndpoint string
	etcdPid      int // the etcd process's, for benchmarks' CPU figures
	testClient   *clientv3.Client
	prefixes     atomic.Int64
)

// serverEnv names the data directory of the etcd a child test binary
// serves.
const serverEnv = "LOOM_ETCD_TEST_SERVER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(serverEnv); dir != "" {
		os.Exit(serveEtcd(dir))
	}
	os.Exit(runTests(m))
}

// serveEtcd runs the test etcd (in the child process): it prints the client
// endpoint on a line of its own and serves until its standard input closes.
func serveEtcd(dir string) int {
	var (
		e        *embed.Etcd
		endpoint string
		err      error
	)
	// The ports are picked free just before etcd binds them; another
	// process could take one in between, so try a few times.
	for attempt := 0; attempt < 5; attempt++ {
		if e, endpoint, err = startEtcd(dir, attempt); err == nil {
			break
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the embedded etcd:", err)
		return 1
	}
	defer e.Close()
	fmt.Println(endpoint)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "loom-etcd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)

	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), serverEnv+"="+dir)
	child.Stderr = os.Stderr
	stdin, err := child.StdinPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := child.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting the etcd process:", err)
		return 1
	}
	etcdPid = child.Process.Pid
	defer func() {
		stdin.Close()
		_ = child.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "the etcd process did not report its endpoint:", err)
		return 1
	}
	testEndpoint = strings.TrimSpace(line)

	testClient, err = newTestClient()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer testClient.Close()
	return m.Run()
}

// freeURL returns a loopback URL on a port that was free a moment ago.
func freeURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

// startEtcd starts a single-member etcd with its data under dir, tuned for
// tests: no fsync (the data dies with the test), small quota, quick
// snapshots, quiet logs.
func startEtcd(dir string, attempt int) (*embed.Etcd, string, error) {
	cfg := embed.NewConfig()
	cfg.Name = "test"
	cfg.Dir = fmt.Sprintf("%s/member-%d", dir, attempt)
	client, err := freeURL()
	if err != nil {
		return nil, "", err
	}
	peer, err := freeURL()
	if err != nil {
		return nil, "", err
	}
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ListenMetricsUrls = nil
	cfg.EnableGRPCGateway = false
	cfg.UnsafeNoFsync = true
	cfg.QuotaBackendBytes = 512 << 20
	cfg.SnapshotCount = 20000
	// Its log goes to a file beside the data, printed if it fails to start;
	// shutting down logs errors that mean nothing to these tests.
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{cfg.Dir + ".log"}

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		if log, rerr := os.ReadFile(cfg.Dir + ".log"); rerr == nil {
			os.Stderr.Write(log)
		}
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, "", fmt.Errorf("etcd did not become ready")
	}
	return e, client.Host, nil
}

func newTestClient() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{testEndpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// newPrefix returns a key prefix no other test uses.
func newPrefix() string {
	return fmt.Sprintf("/test-%d", prefixes.Add(1))
}

// newTestBackend returns a backend under a fresh prefix.
func newTestBackend(t testing.TB, opts ...Option) *Backend {
	t.Helper()
	return New(testClient, append([]Option{WithPrefix(newPrefix())}, opts...)...)
}

// ctx returns a context cancelled at the end of the test.
func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
