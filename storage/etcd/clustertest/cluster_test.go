//go:build cluster

package clustertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
)

const (
	// leaseTTL is the servers' -lease-ttl.
	leaseTTL = 3 * time.Second
	// failoverSlack is how much longer than the TTL a new leader may take
	// to start the singleton controllers after the old one died: etcd's
	// own leader election when its leader is the member killed (the new
	// etcd leader then renews every lease once, by the TTL, so the dead
	// server's lease outlives it by up to the election time), etcd's lease
	// expiry check, the campaign's watch.
	failoverSlack = 5 * time.Second
	// reconcileBound is how long a running leader may take to reconcile a
	// new Bar.
	reconcileBound = 3 * time.Second
	// inFlightBytes is the size from which a request a server sends to
	// etcd is taken for a write: a transaction carrying a resource, where
	// reads, lease keep-alives and flow control are tens of bytes.
	inFlightBytes = 256
	// linkDelay is how long the requests of the server that is to freeze
	// spend in flight before it does.
	linkDelay = 500 * time.Millisecond
	// keepNames Bars are written over and over; goneNames are created,
	// then deleted after the faults.
	keepNames = 16
	goneNames = 4
)

// etcdMember is one member of the test's etcd cluster.
type etcdMember struct {
	*proc
	name      string
	clientURL string
	bin, dir  string
	args      []string // to restart it on its data directory
}

// restart starts the member again on its data directory (after a kill)
// and waits until it serves.
func (m *etcdMember) restart(t *testing.T) {
	t.Helper()
	m.proc = start(t, m.dir, m.name+"-restarted", m.bin, m.args...)
	if err := poll(time.Now().Add(30*time.Second), func() error {
		if m.exited() {
			return fmt.Errorf("%s exited: %v\n%s", m.name, m.err, m.tail(10))
		}
		if !strings.Contains(m.output(), "ready\n") {
			return fmt.Errorf("%s is not ready", m.name)
		}
		return nil
	}); err != nil {
		t.Fatalf("restarting %s: %v", m.name, err)
	}
}

// loomServer is one `loom server -storage etcd` process.
type loomServer struct {
	*proc
	node     string
	addr     string
	httpAddr string // as given: port 0 when the system picked it
	client   pbresource.ResourceServiceClient
	// proxies stand between the server and each etcd member, to cut it
	// off from etcd (see faultProxy).
	proxies []*faultProxy
}

// slowEtcd delays what the server sends to etcd by d.
func (s *loomServer) slowEtcd(d time.Duration) {
	for _, p := range s.proxies {
		p.slow(d)
	}
}

// holdIfWriteInFlight cuts the server off from etcd (one way, see
// faultProxy) if a chunk of at least minBytes it sent is still in flight,
// and reports whether it did.
func (s *loomServer) holdIfWriteInFlight(minBytes int) bool {
	for _, p := range s.proxies {
		if p.holdIfPending(minBytes) {
			for _, q := range s.proxies {
				q.hold()
			}
			return true
		}
	}
	return false
}

// releaseEtcd delivers what the server sent while slowed down or cut off,
// and forwards at once again.
func (s *loomServer) releaseEtcd() {
	for _, p := range s.proxies {
		p.release()
	}
}

// TestCluster runs 3 loom servers on a 3-member etcd cluster, all on
// loopback, with a client writing Bars through one of them; kills the
// leading server and etcd's leader member; and checks that a new leader
// reconciles within the lease TTL plus a bound, that no acknowledged write
// is lost, that every Bar ends with the example controller's status for its
// final generation, and that no two servers ran the singleton controllers
// in overlapping terms.
func TestCluster(t *testing.T) {
	began := time.Now()
	c := startCluster(t)
	members, etcd, servers := c.members, c.etcd, c.servers

	// One server leads.
	leader := leadingServer(t, servers)
	firstTerm := currentTerm(leader)
	t.Logf("%s leads, term %d", leader.node, firstTerm)

	// The client writes through a server that will survive.
	var via *loomServer
	for _, s := range servers {
		if s != leader {
			via = s
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	w := &writer{client: via.client, acked: map[string]string{}}
	for i := range goneNames {
		w.write(ctx, t, fmt.Sprintf("gone-%02d", i), "doomed")
	}
	writerDone := make(chan struct{})
	stopWriter := make(chan struct{})
	go func() {
		defer close(writerDone)
		w.run(ctx, t, stopWriter)
	}()
	defer func() {
		select {
		case <-stopWriter:
		default:
			close(stopWriter)
		}
		<-writerDone
	}()

	// Steady state first: two rounds written, and the Bars the writer
	// leaves alone reconciled (the others change all the time).
	if err := poll(time.Now().Add(30*time.Second), func() error {
		if err := w.waitRounds(2); err != nil {
			return err
		}
		return allReconciled(ctx, via.client, withPrefix(w.snapshot(), "gone-"), false)
	}); err != nil {
		t.Fatalf("before the faults: %v", err)
	}

	// The faults: the leading server and etcd's leader member die at once.
	victim := etcdLeader(ctx, t, etcd, members)
	t.Logf("killing %s (the leading server) and %s (etcd's leader)", leader.node, victim.name)
	rounds := w.roundsDone()
	leader.kill()
	victim.kill()
	killedAt := leader.ended

	// A surviving server leads within the TTL plus the bound, and its
	// controllers reconcile a Bar written after the faults promptly. (The
	// write itself may take a while: etcd answers a proposal caught in its
	// own leader election with a timeout after 7 s, and the writer retries.)
	var newLeader *loomServer
	var elected time.Time
	if err := poll(killedAt.Add(leaseTTL+failoverSlack), func() error {
		for _, s := range servers {
			if s == leader {
				continue
			}
			for _, l := range s.logLines() {
				if l.Message == "singleton controller starting" && l.int64Field("term") > firstTerm {
					newLeader, elected = s, l.Time
					return nil
				}
			}
		}
		return errors.New("no surviving server runs the singleton controllers")
	}); err != nil {
		t.Fatalf("within %s of the leader's death: %v", leaseTTL+failoverSlack, err)
	}
	probe := w.write(ctx, t, "probe", "after the faults")
	probeAcked := time.Now()
	if err := poll(probeAcked.Add(reconcileBound), func() error { return observed(ctx, via.client, probe) }); err != nil {
		t.Fatalf("a Bar written after the faults was not reconciled within %s: %v", reconcileBound, err)
	}
	t.Logf("after the leader died: %s ran the singletons (term %d) after %s; the probe was written after %s and reconciled %s later",
		newLeader.node, currentTerm(newLeader), elected.Sub(killedAt).Round(time.Millisecond),
		probeAcked.Sub(killedAt).Round(time.Millisecond), time.Since(probeAcked).Round(time.Millisecond))

	// Deletes after the faults, and more rounds of writes.
	for i := range goneNames {
		w.delete(ctx, t, fmt.Sprintf("gone-%02d", i))
	}

	// The killed etcd member comes back on its data directory and catches
	// up with what was committed without it.
	victim.restart(t)
	caughtUp := etcdRevision(ctx, t, etcd)
	if err := poll(time.Now().Add(30*time.Second), func() error {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := etcd.Status(sctx, victim.clientURL)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %v", victim.name, err)
		}
		if st.Header.Revision < caughtUp {
			return fmt.Errorf("%s is at revision %d, want %d", victim.name, st.Header.Revision, caughtUp)
		}
		return nil
	}); err != nil {
		t.Fatalf("after its restart: %v", err)
	}
	t.Logf("%s restarted and caught up with revision %d", victim.name, caughtUp)
	if err := poll(time.Now().Add(60*time.Second), func() error { return w.waitRounds(rounds + 3) }); err != nil {
		t.Fatal(err)
	}

	// The new leader freezes (SIGSTOP: as in a long pause of the process
	// or its VM). The third server takes over once the frozen one's lease
	// expires; when the frozen one wakes up, what it was in the middle of
	// is refused by the fence, and it stops its controllers.
	paused := newLeader
	var third *loomServer
	for _, s := range servers {
		if s != leader && s != paused {
			third = s
		}
	}
	if via == paused {
		// Move the writer first, and let its request in flight finish.
		writes := w.acks()
		w.setClient(third.client)
		if err := poll(time.Now().Add(20*time.Second), func() error {
			if w.acks() < writes+2 {
				return errors.New("the writer has not written through the third server yet")
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		via = third
	}
	pausedTerm := currentTerm(paused)
	// Its writes are put in flight first: its link to etcd is slowed down
	// (each request spends linkDelay in flight) and, as soon as a status
	// write is on the way, cut (one way: what etcd sends still arrives).
	// Then it freezes. The lease keep-alives it sent after its last
	// delivered one are held too, so as far as the store can tell its term
	// ended when it was cut off; what it had in flight arrives after the
	// next term began.
	// The writer pauses meanwhile: its Bars would change faster than a
	// slowed-down server can write their status (its status writes would
	// lose the race and never be sent), and the flow control of its watch
	// over the slowed link would leave its cache ever further behind. A Bar
	// of its own, written once per attempt, gives it something to reconcile
	// besides what it has queued.
	w.pause()
	paused.slowEtcd(linkDelay)
	inFlight := false
	for attempt := 0; !inFlight; attempt++ {
		if attempt == 10 {
			w.resume()
			paused.releaseEtcd()
			largest := 0
			for _, p := range paused.proxies {
				largest = max(largest, p.largestSlowed())
			}
			t.Fatalf("%s sent no write to etcd after %d changes of in-flight (no request of %d bytes or more; the largest sent was %d bytes)",
				paused.node, attempt, inFlightBytes, largest)
		}
		w.write(ctx, t, "in-flight", fmt.Sprintf("attempt %d", attempt))
		// The controller gets to the Bar after the keep Bars queued before
		// it, each reconciled over the slowed link (and retried when the
		// writer changed it meanwhile): a while on a busy machine, and each
		// new attempt changes the Bar under it again.
		inFlight = poll(time.Now().Add(8*time.Second), func() error {
			if !paused.holdIfWriteInFlight(inFlightBytes) {
				return errors.New("no write in flight")
			}
			return nil
		}) == nil
	}
	pausedAt := time.Now()
	t.Logf("freezing %s (term %d) with a write in flight", paused.node, pausedTerm)
	paused.signal(syscall.SIGSTOP)
	w.resume()
	var thirdTerm int64
	if err := poll(pausedAt.Add(leaseTTL+failoverSlack), func() error {
		for _, l := range third.logLines() {
			if l.Message == "singleton controller starting" && l.int64Field("term") > pausedTerm {
				thirdTerm, elected = l.int64Field("term"), l.Time
				return nil
			}
		}
		return fmt.Errorf("%s does not run the singleton controllers", third.node)
	}); err != nil {
		paused.signal(syscall.SIGCONT)
		t.Fatalf("within %s of freezing the leader: %v", leaseTTL+failoverSlack, err)
	}
	// What the frozen server sent reaches etcd now, after the new term
	// began; and etcd compacts its history meanwhile, so the frozen
	// server's watches cannot resume where they stopped.
	paused.releaseEtcd()
	compactRev := compact(ctx, t, etcd)
	t.Logf("delivered what %s sent while cut off; compacted etcd at revision %d", paused.node, compactRev)
	probe2 := w.write(ctx, t, "probe-2", "after the freeze")
	probe2Acked := time.Now()
	if err := poll(probe2Acked.Add(reconcileBound), func() error { return observed(ctx, via.client, probe2) }); err != nil {
		paused.signal(syscall.SIGCONT)
		t.Fatalf("a Bar written after the freeze was not reconciled within %s: %v", reconcileBound, err)
	}
	resumedAt := time.Now()
	paused.signal(syscall.SIGCONT)
	// Every singleton controller of its term stops (the Bar controller
	// once its refused write returned, so the refusal is logged by then).
	if err := poll(resumedAt.Add(5*time.Second), func() error {
		started, stopped := 0, 0
		for _, l := range paused.logLines() {
			if l.int64Field("term") != pausedTerm {
				continue
			}
			switch {
			case l.Message == "singleton controller starting":
				started++
			case l.Message == "singleton controller stopped" && l.Time.After(resumedAt):
				stopped++
			}
		}
		if started == 0 || stopped < started {
			return fmt.Errorf("%s has stopped %d of its %d controllers of term %d since it woke up", paused.node, stopped, started, pausedTerm)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	fenced := 0
	for _, l := range paused.logLines() {
		if l.Time.After(resumedAt) && l.Message == "write refused by the fence: its leadership term has ended" {
			fenced++
		}
	}
	t.Logf("after the freeze: %s ran the singletons (term %d) after %s; %s woke up after %s, stopped, and had %d writes refused by the fence",
		third.node, thirdTerm, elected.Sub(pausedAt).Round(time.Millisecond), paused.node,
		resumedAt.Sub(pausedAt).Round(time.Millisecond), fenced)
	if fenced == 0 {
		t.Errorf("%s woke up with writes in flight from its term %d, but the server logged no write refused by the fence", paused.node, pausedTerm)
	}

	if err := poll(time.Now().Add(60*time.Second), func() error { return w.waitRounds(rounds + 5) }); err != nil {
		t.Fatal(err)
	}
	close(stopWriter)
	<-writerDone
	if err := w.failure(); err != nil {
		t.Fatal(err)
	}

	// Every acknowledged write is there, every Bar is reconciled at its
	// final generation, the deleted ones are gone; on both survivors.
	final := w.snapshot()
	for _, s := range servers {
		if s == leader {
			continue
		}
		if err := poll(time.Now().Add(30*time.Second), func() error { return allReconciled(ctx, s.client, final, true) }); err != nil {
			t.Fatalf("through %s: %v", s.node, err)
		}
	}
	t.Logf("%d writes and %d deletes acknowledged (%d retried after errors); all present and reconciled",
		w.stats.writes, w.stats.deletes, w.stats.retries)

	// The survivors shut down cleanly (a data race found by the race
	// detector makes the exit status non-zero).
	for _, s := range servers {
		if s != leader {
			if err := s.stop(15 * time.Second); err != nil {
				t.Errorf("%s: %v\n%s", s.node, err, s.tail(20))
			}
		}
	}
	for _, s := range servers {
		if strings.Contains(s.output(), "WARNING: DATA RACE") {
			t.Errorf("%s found a data race; see %s", s.node, s.log)
		}
	}

	// Terms, from the servers' logs. The killed server's term ended when
	// it died. The frozen server logged the end of its term only after it
	// woke up, but it ran nothing while frozen, and everything it tried to
	// write once awake was refused by the fence: as far as the store can
	// tell, its term ended when it froze.
	checkTerms(t, servers, map[*loomServer]cut{
		leader: {term: firstTerm, at: leader.ended},
		paused: {term: pausedTerm, at: pausedAt},
	})
	if os.Getenv("LOOM_CLUSTER_TEST_LOGS") != "" {
		for _, s := range servers {
			t.Logf("log of %s:\n%s", s.node, s.output())
		}
	}

	for _, m := range members {
		_ = m.stop(10 * time.Second)
	}
	t.Logf("total %s", time.Since(began).Round(time.Millisecond))
}

// testCluster is the etcd cluster and the loom servers of one test.
type testCluster struct {
	members []*etcdMember
	etcd    *clientv3.Client // a client of every member
	servers []*loomServer
	// What it takes to start a server again.
	dir, bin  string
	endpoints []string
}

// serverAddrs are the addresses a server listens on.
type serverAddrs struct{ grpc, http string }

// startCluster builds the binaries, starts a 3-member etcd cluster and 3
// loom servers on it, and dumps their logs if the test fails.
func startCluster(t *testing.T) *testCluster {
	t.Helper()
	return startClusterAt(t, nil)
}

// startClusterAt is startCluster with the servers' gRPC and HTTP addresses
// given (grpcAddrs[i], httpAddrs[i]); nil picks free ports.
func startClusterAt(t *testing.T, addrs []serverAddrs) *testCluster {
	t.Helper()
	began := time.Now()
	dir := t.TempDir()
	// The servers run with the race detector when it is available: the
	// failover paths run for real only here. etcd is etcd's business.
	var loomFlags []string
	if raceEnabled(t) {
		loomFlags = []string{"-race"}
	}
	bins := build(t, dir, loomFlags, "./cmd/loom")
	for k, v := range build(t, dir, nil, "./storage/etcd/internal/etcdmember") {
		bins[k] = v
	}
	t.Logf("built the binaries (loom %v) in %s", loomFlags, time.Since(began).Round(time.Millisecond))

	c := &testCluster{members: startEtcdCluster(t, dir, bins["./storage/etcd/internal/etcdmember"])}
	var endpoints []string
	for _, m := range c.members {
		endpoints = append(endpoints, m.clientURL)
	}
	etcd, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { etcd.Close() })
	c.etcd = etcd

	c.dir, c.bin, c.endpoints = dir, bins["./cmd/loom"], endpoints
	c.servers = make([]*loomServer, 3)
	for i := range c.servers {
		at := serverAddrs{grpc: "127.0.0.1:0", http: "127.0.0.1:0"}
		if addrs != nil {
			at = addrs[i]
		}
		c.servers[i] = startLoom(t, dir, c.bin, fmt.Sprintf("loom-%d", i+1), endpoints, at)
	}
	dumpOnFailure(t, c.members, c.servers)
	t.Logf("cluster up in %s", time.Since(began).Round(time.Millisecond))
	return c
}

// leadingServer waits until exactly one server leads, and returns it.
func leadingServer(t *testing.T, servers []*loomServer) *loomServer {
	t.Helper()
	var leader *loomServer
	if err := poll(time.Now().Add(15*time.Second), func() error {
		var leading []*loomServer
		for _, s := range servers {
			if currentTerm(s) != 0 {
				leading = append(leading, s)
			}
		}
		if len(leading) != 1 {
			return fmt.Errorf("%d servers lead, want 1", len(leading))
		}
		leader = leading[0]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return leader
}

// startEtcdCluster starts a 3-member etcd cluster of etcdmember processes
// and waits until every member serves. Ports are picked free just before
// use; if another process took one, the cluster is started again.
func startEtcdCluster(t *testing.T, dir, bin string) []*etcdMember {
	t.Helper()
	var lastErr error
	for attempt := range 3 {
		ports, err := freePorts(6)
		if err != nil {
			t.Fatal(err)
		}
		var peers []string
		for i := range 3 {
			peers = append(peers, fmt.Sprintf("etcd-%d=http://127.0.0.1:%d", i+1, ports[2*i+1]))
		}
		members := make([]*etcdMember, 3)
		for i := range members {
			name := fmt.Sprintf("etcd-%d", i+1)
			clientURL := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
			args := []string{
				"-name", name,
				"-data-dir", filepath.Join(dir, fmt.Sprintf("%s-try%d.data", name, attempt)),
				"-client-url", clientURL,
				"-peer-url", fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
				"-initial-cluster", strings.Join(peers, ","),
				"-cluster-token", fmt.Sprintf("loom-cluster-test-%d", attempt),
				"-log-file", filepath.Join(dir, fmt.Sprintf("%s-try%d.etcd.log", name, attempt)),
				"-stdin-lifetime",
			}
			p := start(t, dir, fmt.Sprintf("%s-try%d", name, attempt), bin, args...)
			members[i] = &etcdMember{proc: p, name: name, clientURL: clientURL, bin: bin, dir: dir, args: args}
		}
		lastErr = poll(time.Now().Add(30*time.Second), func() error {
			for _, m := range members {
				if m.exited() {
					return fmt.Errorf("%s exited: %v\n%s", m.name, m.err, m.tail(10))
				}
				if !strings.Contains(m.output(), "ready\n") {
					return fmt.Errorf("%s is not ready", m.name)
				}
			}
			return nil
		})
		if lastErr == nil {
			return members
		}
		t.Logf("starting the etcd cluster (attempt %d): %v", attempt+1, lastErr)
		for _, m := range members {
			m.kill()
		}
	}
	t.Fatalf("could not start the etcd cluster: %v", lastErr)
	return nil
}

var listeningRE = regexp.MustCompile(`"addr":"([^"]+)"`)

// startLoom starts a loom server on the cluster and waits until it serves.
func startLoom(t *testing.T, dir, bin, node string, endpoints []string, at serverAddrs) *loomServer {
	t.Helper()
	var proxies []*faultProxy
	var via []string
	for _, e := range endpoints {
		px := newFaultProxy(t, strings.TrimPrefix(e, "http://"))
		proxies = append(proxies, px)
		via = append(via, "http://"+px.addr())
	}
	p := start(t, dir, node, bin, "server",
		"-storage", "etcd",
		"-etcd-endpoints", strings.Join(via, ","),
		"-etcd-prefix", "/loom-cluster-test",
		"-grpc-addr", at.grpc,
		"-http-addr", at.http,
		"-lease-ttl", leaseTTL.String(),
		"-node-name", node,
		"-examples",
		"-log-json",
	)
	s := &loomServer{proc: p, node: node, proxies: proxies, httpAddr: at.http}
	if err := poll(time.Now().Add(20*time.Second), func() error {
		if p.exited() {
			return fmt.Errorf("%s exited: %v\n%s", node, p.err, p.tail(20))
		}
		for _, l := range p.logLines() {
			if l.Message == "gRPC server listening" {
				s.addr = l.stringField("addr")
				return nil
			}
		}
		return fmt.Errorf("%s is not listening yet", node)
	}); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	s.client = pbresource.NewResourceServiceClient(conn)
	return s
}

// dumpOnFailure prints the end of every process's log if the test fails.
func dumpOnFailure(t *testing.T, members []*etcdMember, servers []*loomServer) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, s := range servers {
			t.Log(s.tail(40))
		}
		for _, m := range members {
			t.Log(m.tail(10))
		}
	})
}

// currentTerm returns the term s leads in according to its log, 0 if it
// does not lead.
func currentTerm(s *loomServer) int64 {
	var term int64
	for _, l := range s.logLines() {
		switch l.Message {
		case "became leader":
			term = l.int64Field("term")
		case "lost leadership":
			term = 0
		}
	}
	return term
}

// etcdLeader returns the member that is etcd's raft leader now.
func etcdLeader(ctx context.Context, t *testing.T, etcd *clientv3.Client, members []*etcdMember) *etcdMember {
	t.Helper()
	var leader *etcdMember
	if err := poll(time.Now().Add(10*time.Second), func() error {
		for _, m := range members {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := etcd.Status(sctx, m.clientURL)
			cancel()
			if err == nil && st.Leader != 0 && st.Leader == st.Header.MemberId {
				leader = m
				return nil
			}
		}
		return errors.New("no etcd member says it leads")
	}); err != nil {
		t.Fatal(err)
	}
	return leader
}

// writer writes Bars through one server, round after round, retrying each
// write until it is acknowledged, and remembers what was acknowledged last.
type writer struct {
	mu     sync.Mutex
	gate   chan struct{} // while not nil, run waits for it to close (see pause)
	client pbresource.ResourceServiceClient
	acked  map[string]string // name -> baz last acknowledged; "" deleted
	rounds int
	err    error
	stats  struct{ writes, deletes, retries int }
}

func barID(name string) *pbresource.ID {
	return &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name}
}

// retry calls op until it succeeds, for up to a minute. Errors that mean
// "try again" (the server or etcd unavailable, a write in flight when a
// member died, a lost race) are retried; anything else fails.
func (w *writer) retry(ctx context.Context, what string, op func(context.Context) error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := op(octx)
		cancel()
		if err == nil {
			return nil
		}
		switch status.Code(err) {
		case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded, codes.Internal:
		case codes.FailedPrecondition:
			// A Write to a Bar marked for deletion waits for the
			// controller to finish deleting it.
		default:
			return fmt.Errorf("%s: %w", what, err)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: still failing after a minute: %w", what, err)
		}
		w.mu.Lock()
		w.stats.retries++
		w.mu.Unlock()
		time.Sleep(50 * time.Millisecond) // between retries of a failed write
	}
}

// write writes the Bar name with baz until acknowledged, and returns its ID.
func (w *writer) write(ctx context.Context, t *testing.T, name, baz string) *pbresource.ID {
	id, err := w.tryWrite(ctx, name, baz)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (w *writer) tryWrite(ctx context.Context, name, baz string) (*pbresource.ID, error) {
	data, err := anypb.New(&pbfoov1.Bar{Baz: baz})
	if err != nil {
		return nil, err
	}
	var id *pbresource.ID
	err = w.retry(ctx, "writing "+name, func(ctx context.Context) error {
		rsp, err := w.currentClient().Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: barID(name), Data: data}})
		if err == nil {
			id = rsp.Resource.Id
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.acked[name] = baz
	w.stats.writes++
	w.mu.Unlock()
	return id, nil
}

// delete deletes the Bar name until acknowledged.
func (w *writer) delete(ctx context.Context, t *testing.T, name string) {
	err := w.retry(ctx, "deleting "+name, func(ctx context.Context) error {
		_, err := w.currentClient().Delete(ctx, &pbresource.DeleteRequest{Id: barID(name)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	w.acked[name] = ""
	w.stats.deletes++
	w.mu.Unlock()
}

// run writes rounds (every keep Bar once, with the round in its baz) until
// stop is closed; the write in progress then completes.
// pause makes run wait before its next write until resume.
func (w *writer) pause() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gate == nil {
		w.gate = make(chan struct{})
	}
}

// resume lets run write again.
func (w *writer) resume() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gate != nil {
		close(w.gate)
		w.gate = nil
	}
}

func (w *writer) run(ctx context.Context, t *testing.T, stop <-chan struct{}) {
	for round := 1; ; round++ {
		for i := range keepNames {
			w.mu.Lock()
			gate := w.gate
			w.mu.Unlock()
			if gate != nil {
				select {
				case <-gate:
				case <-stop:
					return
				}
			}
			select {
			case <-stop:
				return
			default:
			}
			if _, err := w.tryWrite(ctx, fmt.Sprintf("keep-%02d", i), fmt.Sprintf("round %d", round)); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
		}
		w.mu.Lock()
		w.rounds = round
		w.mu.Unlock()
	}
}

func (w *writer) currentClient() pbresource.ResourceServiceClient {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.client
}

// setClient makes the next requests go through c.
func (w *writer) setClient(c pbresource.ResourceServiceClient) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.client = c
}

// acks counts the acknowledged writes.
func (w *writer) acks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats.writes
}

func (w *writer) roundsDone() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rounds
}

// waitRounds returns nil once the writer has finished round n, or its
// error if it gave up.
func (w *writer) waitRounds(n int) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return fmt.Errorf("the writer gave up: %w", w.err)
	}
	if w.rounds < n {
		return fmt.Errorf("the writer finished %d rounds, want %d", w.rounds, n)
	}
	return nil
}

func (w *writer) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *writer) snapshot() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]string, len(w.acked))
	for k, v := range w.acked {
		out[k] = v
	}
	return out
}

// consistent asks for a linearizable read.
func consistent(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "x-consul-consistency-mode", "consistent")
}

// observed reports whether the Bar id carries the example controller's
// status for its current generation.
func observed(ctx context.Context, client pbresource.ResourceServiceClient, id *pbresource.ID) error {
	rctx, cancel := context.WithTimeout(consistent(ctx), 5*time.Second)
	defer cancel()
	rsp, err := client.Read(rctx, &pbresource.ReadRequest{Id: id})
	if err != nil {
		return fmt.Errorf("reading %s: %w", id.Name, err)
	}
	res := rsp.Resource
	st := res.Status[foo.StatusKey]
	if st.GetObservedGeneration() != res.Generation {
		return fmt.Errorf("%s: status %s observed generation %q, the Bar is at %q",
			id.Name, foo.StatusKey, st.GetObservedGeneration(), res.Generation)
	}
	return nil
}

// allReconciled checks every Bar against what the writer was acknowledged:
// the data it wrote last, or gone once deleted; and, when status is
// wanted, the controller's status at the Bar's final generation.
func allReconciled(ctx context.Context, client pbresource.ResourceServiceClient, want map[string]string, final bool) error {
	rctx, cancel := context.WithTimeout(consistent(ctx), 10*time.Second)
	defer cancel()
	for _, name := range sortedKeys(want) {
		baz := want[name]
		rsp, err := client.Read(rctx, &pbresource.ReadRequest{Id: barID(name)})
		if baz == "" {
			if status.Code(err) != codes.NotFound {
				return fmt.Errorf("%s was deleted, but a read gives %v %v", name, rsp.GetResource(), err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		res := rsp.Resource
		var bar pbfoov1.Bar
		if err := res.Data.UnmarshalTo(&bar); err != nil {
			return err
		}
		// The example's Mutate hook lower-cases baz.
		if bar.Baz != strings.ToLower(baz) {
			return fmt.Errorf("%s holds baz %q, but the last acknowledged write was %q: a write was lost", name, bar.Baz, baz)
		}
		st := res.Status[foo.StatusKey]
		if st.GetObservedGeneration() != res.Generation {
			return fmt.Errorf("%s: status observed generation %q, the Bar is at %q", name, st.GetObservedGeneration(), res.Generation)
		}
	}
	if !final {
		return nil
	}
	// Nothing is left that the writer did not write.
	list, err := client.List(rctx, &pbresource.ListRequest{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}})
	if err != nil {
		return fmt.Errorf("listing: %w", err)
	}
	for _, res := range list.Resources {
		if want[res.Id.Name] == "" {
			return fmt.Errorf("%s exists, but the writer deleted it (or never wrote it)", res.Id.Name)
		}
	}
	return nil
}

// withPrefix returns the entries of m whose keys start with prefix.
func withPrefix(m map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if strings.HasPrefix(k, prefix) {
			out[k] = v
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// term is one server's run of the singleton controllers in one term.
type term struct {
	node       string
	rev        int64
	start, end time.Time
}

// cut says that a server's term ended at a given time whatever its log
// says: it was killed or frozen then.
type cut struct {
	term int64
	at   time.Time
}

// checkTerms reads from every server's log when it ran singleton
// controllers, in which term, and checks that no two servers' runs overlap
// in time, that terms grow from one run to the next, and that a server
// only ran them in a term it was leader of. cuts end terms early.
func checkTerms(t *testing.T, servers []*loomServer, cuts map[*loomServer]cut) {
	t.Helper()
	var terms []*term
	for _, s := range servers {
		led := map[int64]bool{}
		open := map[int64]*term{}
		running := map[int64]int{} // controllers running, by term
		for _, l := range s.logLines() {
			switch l.Message {
			case "became leader":
				led[l.int64Field("term")] = true
			case "singleton controller starting":
				rev := l.int64Field("term")
				if rev == 0 {
					t.Errorf("%s started %s without a fencing term: %v", s.node, l.stringField("controller"), l.Fields)
					continue
				}
				tm := open[rev]
				if tm == nil {
					tm = &term{node: s.node, rev: rev, start: l.Time}
					open[rev] = tm
					terms = append(terms, tm)
				}
				running[rev]++
			case "singleton controller stopped":
				rev := l.int64Field("term")
				running[rev]--
				if tm := open[rev]; tm != nil && l.Time.After(tm.end) {
					tm.end = l.Time
				}
			}
		}
		for rev, tm := range open {
			// The leadership log and the controllers' logs race; the
			// order of their lines says nothing.
			if !led[rev] {
				t.Errorf("%s ran singleton controllers in term %d but never logged that it led in it", s.node, tm.rev)
			}
		}
		c, hasCut := cuts[s]
		for rev, n := range running {
			if n > 0 && (!hasCut || c.term != rev) {
				t.Errorf("%s never logged the end of %d singleton controllers of term %d", s.node, n, rev)
			}
		}
		if hasCut {
			if tm := open[c.term]; tm != nil {
				tm.end = c.at
			} else {
				t.Errorf("%s did not run singleton controllers in term %d", s.node, c.term)
			}
		}
	}
	slices.SortFunc(terms, func(a, b *term) int { return a.start.Compare(b.start) })
	for i, tm := range terms {
		t.Logf("term %d on %s: %s to %s", tm.rev, tm.node, tm.start.Format("15:04:05.000"), tm.end.Format("15:04:05.000"))
		if i > 0 && tm.rev <= terms[i-1].rev {
			t.Errorf("term %d on %s started after term %d on %s: terms must grow", tm.rev, tm.node, terms[i-1].rev, terms[i-1].node)
		}
		for _, other := range terms[:i] {
			if other.node != tm.node && !tm.start.After(other.end) {
				t.Errorf("%s started the singletons (term %d) at %s, before %s stopped them (term %d) at %s",
					tm.node, tm.rev, tm.start.Format(time.RFC3339Nano), other.node, other.rev, other.end.Format(time.RFC3339Nano))
			}
		}
	}
	if len(terms) < 2 {
		t.Errorf("%d terms in the logs, want at least 2 (before and after the leader died)", len(terms))
	}
}

// etcdRevision returns etcd's current revision, read linearizably.
func etcdRevision(ctx context.Context, t *testing.T, etcd *clientv3.Client) int64 {
	t.Helper()
	resp, err := etcd.Get(ctx, "/loom-cluster-test/no-such-key")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// compact compacts etcd's history up to its current revision, which it
// returns: watches that must resume from before it get ErrCompacted.
func compact(ctx context.Context, t *testing.T, etcd *clientv3.Client) int64 {
	t.Helper()
	rev := etcdRevision(ctx, t, etcd)
	if _, err := etcd.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		t.Fatalf("compacting at revision %d: %v", rev, err)
	}
	return rev
}
