package remote_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/dial"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/testcerts"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/leaderelection"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/remote"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/inmem"
)

// statusKey is the status the test controller writes on every Qux.
const statusKey = "remote-test"

// register returns a RegisterFunc adding a singleton controller that
// writes, on every Qux, a status whose message is name.
func register(name string) remote.RegisterFunc {
	return func(p *remote.Process) error {
		return p.Manager().Register(controller.NewController(statusKey, foo.QuxType).WithReconciler(
			reconcile.AsDecoded(func(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, q *resource.Decoded[*pbfoov1.Qux]) error {
				_, err := rt.WriteStatus(ctx, q.Resource, statusKey, &pbresource.Status{Conditions: []*pbresource.Condition{
					{Type: "ReconciledBy", State: pbresource.Condition_STATE_TRUE, Message: name},
				}})
				return err
			}, reconcile.DecodedReadOnly())))
	}
}

// serve starts a ResourceService with the lease and example types on a
// loopback listener and returns its address. With tlsFiles it serves TLS;
// with aclFile it checks tokens.
func serve(t *testing.T, tlsFiles *certs.Files, aclFile string, types ...func(resource.Registry) error) string {
	t.Helper()
	reg := resource.NewRegistry()
	for _, add := range types {
		if err := add(reg); err != nil {
			t.Fatal(err)
		}
	}
	cfg := server.Config{Backend: inmem.New(), Registry: reg}
	if aclFile != "" {
		src, err := acl.NewSource(testcerts.Write(t, filepath.Join(t.TempDir(), "acl.yaml"), []byte(aclFile)), nil)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ACLResolver = src.Resolve
	}
	svc := server.New(cfg)
	opts := svc.ServerOptions()
	if tlsFiles != nil {
		sc, err := certs.ServerConfig(*tlsFiles)
		if err != nil {
			t.Fatal(err)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(sc)))
	}
	gs := grpc.NewServer(opts...)
	svc.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

var allTypes = []func(resource.Registry) error{leaderelection.RegisterTypes, foo.RegisterTypes}

// process is a remote.Run started by start.
type process struct {
	name   string
	http   string // the bound HTTP address
	log    *testlog.Buffer
	cancel context.CancelFunc
	done   chan error
}

// start runs remote.Run with args (and the HTTP endpoints on a free port)
// until the test ends, and waits until it serves.
func start(t *testing.T, name string, args ...string) *process {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &process{name: name, log: &testlog.Buffer{}, cancel: cancel, done: make(chan error, 1)}
	listening := make(chan remote.Addrs, 1)
	args = append([]string{"-http-addr", "127.0.0.1:0", "-lease-identity", name, "-log-level", "debug"}, args...)
	go func() {
		p.done <- remote.Run(ctx, args, p.log, register(name), remote.WithName("remote-test"),
			remote.WithListening(func(a remote.Addrs) { listening <- a }))
	}()
	select {
	case a := <-listening:
		p.http = a.HTTP
	case err := <-p.done:
		t.Fatalf("%s exited before listening: %v\nlog:\n%s", name, err, p.log)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not listen within 10s; log:\n%s", name, p.log)
	}
	t.Cleanup(func() {
		if err := p.stop(); err != nil {
			t.Errorf("%s: %v\nlog:\n%s", name, err, p.log)
		}
	})
	return p
}

// stop ends Run and returns its error.
func (p *process) stop() error {
	p.cancel()
	select {
	case err := <-p.done:
		p.done <- err // for a second stop
		return err
	case <-time.After(15 * time.Second):
		return errors.New("Run did not return within 15s of its context ending")
	}
}

// get returns the status code and body of the process's HTTP path.
func (p *process) get(t *testing.T, path string) (int, string) {
	t.Helper()
	rsp, err := http.Get("http://" + p.http + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(rsp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return rsp.StatusCode, string(body)
}

// waitFor polls cond until it holds, failing the test after 15 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}

func (p *process) ready(t *testing.T) func() bool {
	return func() bool { code, _ := p.get(t, "/readyz"); return code == http.StatusOK }
}

func (p *process) holds(t *testing.T) func() bool {
	return func() bool {
		_, body := p.get(t, "/metrics")
		return strings.Contains(body, `loom_leader{lease="remote-test"} 1`)
	}
}

// writeQux writes a Qux and waits until the test controller has
// reconciled it; it returns the replica that did.
func writeQux(t *testing.T, client pbresource.ResourceServiceClient, name string) string {
	t.Helper()
	q := resourcetest.Resource(foo.QuxType, name).WithData(t, &pbfoov1.Qux{Note: name}).Write(t, client)
	var by string
	resourcetest.NewClient(client).WithTimeout(15*time.Second).WaitForResourceState(t, q.Id, func(t resourcetest.T, res *pbresource.Resource) {
		st := res.GetStatus()[statusKey]
		if st.GetObservedGeneration() != res.GetGeneration() || len(st.GetConditions()) != 1 {
			t.Errorf("not reconciled yet")
			return
		}
		by = st.Conditions[0].Message
	})
	return by
}

// Two replicas: the first leads and runs the controller, the second is
// ready as a warm follower; when the leader stops, it releases the lease
// and the follower takes over well before the lease could expire.
func TestReplicasHandOverOnStop(t *testing.T) {
	addr := serve(t, nil, "", allTypes...)
	client := pbresource.NewResourceServiceClient(dialPlain(t, addr))
	args := []string{"-addr", addr, "-lease-ttl", "3s"}

	a := start(t, "a", args...)
	waitFor(t, "a is ready", a.ready(t))
	waitFor(t, "a leads", a.holds(t))
	b := start(t, "b", args...)
	waitFor(t, "b is ready, following", b.ready(t))
	if b.holds(t)() {
		t.Fatal("b holds the lease while a does")
	}
	if _, body := a.get(t, "/readyz"); body != "ok\nleader: leading\n" {
		t.Errorf("/readyz of the leader a: %q, want ok and leader: leading", body)
	}
	if _, body := b.get(t, "/readyz"); body != "ok\nleader: following (warm)\n" {
		t.Errorf("/readyz of the follower b: %q, want ok and leader: following (warm)", body)
	}
	if by := writeQux(t, client, "q1"); by != "a" {
		t.Fatalf("q1 reconciled by %q, want the leader a", by)
	}
	_, metrics := a.get(t, "/metrics")
	for _, m := range []string{"go_goroutines", "process_cpu_seconds_total", "grpc_client_started_total",
		`loom_controller_reconcile_total{controller="remote-test",result="success"}`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}

	stopped := time.Now()
	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b takes over", b.holds(t))
	if took := time.Since(stopped); took >= 3*time.Second {
		t.Fatalf("b took over %v after a stopped: as long as the lease takes to expire", took)
	}
	if !strings.Contains(a.log.String(), "leader lease released") {
		t.Errorf("a did not release the lease; its log:\n%s", a.log)
	}
	if by := writeQux(t, client, "q2"); by != "b" {
		t.Fatalf("q2 reconciled by %q, want the new leader b", by)
	}
	if code, body := b.get(t, "/readyz"); code != http.StatusOK || body != "ok\nleader: leading\n" {
		t.Errorf("/readyz of the new leader b: %d %q, want 200, ok and leader: leading", code, body)
	}
}

// A replica with -warm-standby=false is a cold follower: alive, not
// ready, and /readyz says why and names the flag. Once it leads, it is
// ready and reconciles.
func TestColdFollowerIsNotReady(t *testing.T) {
	addr := serve(t, nil, "", allTypes...)
	client := pbresource.NewResourceServiceClient(dialPlain(t, addr))
	args := []string{"-addr", addr, "-lease-ttl", "3s"}

	a := start(t, "a", args...)
	waitFor(t, "a leads", a.holds(t))
	waitFor(t, "a is ready", a.ready(t))
	b := start(t, "b", append(args, "-warm-standby=false")...)
	code, body := b.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: warm standby: following cold (-warm-standby=false)") ||
		!strings.HasSuffix(body, "\nleader: following (cold)\n") {
		t.Fatalf("/readyz of the cold follower b: %d %q, want 503 naming -warm-standby", code, body)
	}
	if code, _ := b.get(t, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz of the cold follower b: %d, want 200", code)
	}

	if err := a.stop(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b takes over", b.holds(t))
	waitFor(t, "b is ready once it leads", b.ready(t))
	if _, body := b.get(t, "/readyz"); body != "ok\nleader: leading\n" {
		t.Errorf("/readyz of b leading: %q, want ok and leader: leading", body)
	}
	if by := writeQux(t, client, "q1"); by != "b" {
		t.Fatalf("q1 reconciled by %q, want the new leader b", by)
	}
}

// Without leader election there is no leader line: the process always
// runs its controllers.
func TestNoLeaderLineWithoutElection(t *testing.T) {
	addr := serve(t, nil, "", foo.RegisterTypes)
	p := start(t, "solo", "-addr", addr, "-leader-elect=false")
	waitFor(t, "the process is ready", p.ready(t))
	if _, body := p.get(t, "/readyz"); body != "ok\n" {
		t.Errorf("/readyz without leader election: %q, want ok alone", body)
	}
}

const tokenACL = `tokens:
  - name: controllers
    secret: "controllers-secret"
    rules:
      - {type: "foo.v1.Qux", partition: "*", namespace: "*", access: write}
`

// Over TLS with a token file, without leader election: the process runs
// its controllers at once. Its -addr lists a server that does not answer
// too: the process connects to the other.
func TestRunOverTLSWithTokenFile(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "test CA")
	crt, key := ca.WriteLeaf(t, dir, "server")
	caFile := ca.WriteCA(t, dir, "ca")
	addr := serve(t, &certs.Files{Cert: crt, Key: key}, tokenACL, foo.RegisterTypes)
	tokenFile := testcerts.Write(t, filepath.Join(dir, "token"), []byte("controllers-secret\n"))
	httpToken := testcerts.Write(t, filepath.Join(dir, "http-token"), []byte("scrape-secret"))

	p := start(t, "solo", "-addr", deadAddr(t)+","+addr, "-tls-ca", caFile, "-token-file", tokenFile, "-leader-elect=false",
		"-http-token-file", httpToken, "-reload-interval", "20ms")
	waitFor(t, "the process is ready", p.ready(t))
	conn, err := dial.Dial(addr, dial.WithTLS(certs.Files{CA: caFile}), dial.WithToken("controllers-secret"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if by := writeQux(t, pbresource.NewResourceServiceClient(conn), "q1"); by != "solo" {
		t.Fatalf("q1 reconciled by %q, want solo", by)
	}
	if code, _ := p.get(t, "/metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the -http-token-file token = %d, want 401", code)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+p.http+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer scrape-secret")
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	metrics, _ := io.ReadAll(rsp.Body)
	if rsp.StatusCode != http.StatusOK || !strings.Contains(string(metrics), "\nloom_build_info{") {
		t.Errorf("/metrics with the token = %d, without loom_build_info:\n%s", rsp.StatusCode, metrics)
	}
	if strings.Contains(string(metrics), "loom_leader") {
		t.Error("/metrics has the lease gauge without leader election")
	}

	// The -http-token-file replaced: the new token in force, the old one
	// refused, with no restart.
	testcerts.Write(t, httpToken, []byte("renewed-secret"))
	scrape := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.http+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		rsp.Body.Close()
		return rsp.StatusCode
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		oldCode, newCode := scrape("scrape-secret"), scrape("renewed-secret")
		if oldCode == http.StatusUnauthorized && newCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10s after the token file changed: the old token gets %d, the new %d; want 401 and 200", oldCode, newCode)
		}
	}
}

// Against a server that does not know loom.v1.Lease (Consul), Run fails
// with an error that says so, instead of campaigning forever.
func TestRunFailsWithoutTheLeaseType(t *testing.T) {
	addr := serve(t, nil, "", foo.RegisterTypes)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	err := remote.Run(ctx, []string{"-addr", addr, "-http-addr", ""}, io.Discard, register("x"), remote.WithName("remote-test"))
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "loom.v1.Lease") {
		t.Fatalf("Run: %v, want an error naming loom.v1.Lease before the deadline", err)
	}
}

// deadAddr returns a loopback address where nothing answers.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing answers there now
	return addr
}

// A process whose server does not answer is alive but not ready, and says
// why.
func TestNotReadyUntilPrimed(t *testing.T) {
	p := start(t, "lonely", "-addr", deadAddr(t), "-leader-elect=false")
	if code, _ := p.get(t, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d, want 200", code)
	}
	code, body := p.get(t, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "cache") {
		t.Fatalf("/readyz: %d %q, want 503 naming the cache", code, body)
	}
}

// A process without a token against a server with ACLs on is not ready,
// and /readyz names the type and the fix.
func TestNotReadyWithoutAToken(t *testing.T) {
	addr := serve(t, nil, tokenACL, foo.RegisterTypes)
	p := start(t, "tokenless", "-addr", addr, "-leader-elect=false")
	waitFor(t, "/readyz names the refused watch", func() bool {
		code, body := p.get(t, "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "foo.v1.Qux") && strings.Contains(body, "token")
	})
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"tls cert without key", []string{"-tls-cert", "c.pem"}, "-tls-cert and -tls-key"},
		{"bad log level", []string{"-log-level", "loud"}, "-log-level"},
		{"bad lease name", []string{"-lease-name", "Not_A_Name"}, "-lease-name"},
		{"bad lease namespace", []string{"-lease-namespace", "x y"}, "-lease-namespace"},
		{"short lease", []string{"-lease-ttl", "100ms"}, "-lease-ttl must be at least 1s"},
		{"pprof without http", []string{"-http-addr", "", "-pprof"}, "-pprof needs -http-addr"},
		{"argument", []string{"extra"}, `unexpected argument "extra"`},
		{"unknown flag", []string{"-nope"}, "-nope"},
		{"empty addr", []string{"-addr", ""}, "-addr"},
		{"empty addr in list", []string{"-addr", "127.0.0.1:1,,127.0.0.1:2"}, "-addr"},
		{"cold standby without election", []string{"-leader-elect=false", "-warm-standby=false"}, "-warm-standby=false is for followers"},
	} {
		err := remote.Run(context.Background(), tc.args, io.Discard, nil, remote.WithName("remote-test"))
		var usage remote.UsageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: Run(%q) = %v, want a UsageError mentioning %q", tc.name, tc.args, err, tc.wantErr)
		}
	}
	// The lease is named after the command unless -lease-name says otherwise.
	err := remote.Run(context.Background(), nil, io.Discard, nil, remote.WithName("My_Controllers"))
	if !strings.Contains(fmt.Sprint(err), `give -lease-name`) {
		t.Errorf("Run with an invalid command name: %v, want a hint to give -lease-name", err)
	}
	help := &testlog.Buffer{}
	var mine string
	err = remote.Run(context.Background(), []string{"-h"}, help, nil, remote.WithName("remote-test"),
		remote.WithDescription("Greets."), remote.WithFlags(func(fs *flag.FlagSet) { fs.StringVar(&mine, "mine", "", "a flag of mine") }))
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"Usage: remote-test", "Greets.", "-mine", "-addr", "-token-file", "-leader-elect", "-lease-ttl", "-warm-standby", "-http-addr"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("-h output lacks %q:\n%s", want, help)
		}
	}
}

func dialPlain(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := dial.Dial(addr, dial.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}
