//go:build cluster

package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/internal/testkit/robustness"
	"github.com/loomrt/loom/proto/pbresource"
)

const (
	// historyClients run the workload's operations, spread over the 3
	// servers; each runs historyOps operations, unless its server dies.
	historyClients = 6
	historyOps     = 400
	// opTimeout bounds each unary call of the workload: a call held by a
	// fault ends with DeadlineExceeded, its outcome unknown.
	opTimeout = 1500 * time.Millisecond
	// holdFor is how long a server's link to etcd is held: longer than
	// opTimeout, so that its writes in flight reach etcd after their
	// callers gave up.
	holdFor = 3 * time.Second
	// pace is the most a client waits between two operations, so that
	// the run spans the faults.
	pace = 8 * time.Millisecond
)

// TestClusterHistory runs the porcupine-checked workload of
// internal/testkit/robustness on foo.v1.Zip (no controller writes to it) across the
// 3 servers of a cluster: clients spread over every server, watchers on the
// two that survive. Meanwhile, in order, at set numbers of operations: the
// leading server is killed; etcd's leader member is killed, then restarted
// on its data directory; one server's link to etcd is held (its requests
// neither lost nor delivered) for holdFor, then released; etcd is
// compacted. Calls end after opTimeout; Unavailable, DeadlineExceeded and
// Canceled leave an operation's outcome open. The history must be
// linearizable (which includes the final strong reads: no acknowledged
// write lost), eventual reads monotonic per server, and every watch valid.
func TestClusterHistory(t *testing.T) {
	began := time.Now()
	c := startCluster(t)
	leader := leadingServer(t, c.servers)
	var survivors []*loomServer
	index := map[*loomServer]int{}
	for i, s := range c.servers {
		index[s] = i
		if s != leader {
			survivors = append(survivors, s)
		}
	}
	held := survivors[1]
	conns := make([]pbresource.ResourceServiceClient, len(c.servers))
	for i, s := range c.servers {
		conns[i] = dialWithTimeout(t, s.addr, opTimeout)
	}

	seed := robustness.Seeds()[0]
	total := int64((historyClients - historyClients/len(c.servers)) * historyOps) // operations of the survivors' clients
	at := func(share float64) int64 { return int64(share * float64(total)) }
	var (
		progress   atomic.Int64 // operations the survivors' clients began
		leaderDead atomic.Bool
		faultsDone = make(chan struct{})
		// reached[i] is closed when the survivors' clients reach marks[i].
		marks   = []int64{at(0.05), at(0.2), at(0.35), at(0.5), at(0.7)}
		reached = make([]chan struct{}, len(marks))
		gate    = at(0.85) // no client goes past it before every fault is done
	)
	for i := range reached {
		reached[i] = make(chan struct{})
	}
	serverOf := func(client int) int { return client % len(c.servers) }
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := robustness.Config{
		Seed: seed, Clients: historyClients, Ops: historyOps, Names: 3, Watchers: 2,
		SlowWatcher: true, Finalizers: true, Type: foo.ZipType,
		Indeterminate: func(c codes.Code) bool {
			return c == codes.Unavailable || c == codes.DeadlineExceeded || c == codes.Canceled
		},
		Connect: func(i int) (pbresource.ResourceServiceClient, int) {
			var s int
			switch {
			case i < historyClients:
				s = serverOf(i)
			case i < historyClients+2:
				s = index[survivors[(i-historyClients)%2]] // watchers
			default:
				s = index[survivors[0]] // the final write and reads
			}
			return conns[s], s
		},
		Between: func(client int, rng *rand.Rand) bool {
			if c.servers[serverOf(client)] == leader {
				return !leaderDead.Load()
			}
			n := progress.Add(1)
			for i, m := range marks {
				if n == m {
					close(reached[i])
				}
			}
			if n >= gate {
				select {
				case <-faultsDone:
				case <-ctx.Done():
				}
			}
			time.Sleep(time.Duration(rng.Int64N(int64(pace)))) // pacing the load, not waiting for a condition
			return true
		},
	}

	var (
		h      *robustness.History
		runErr error
		ran    = make(chan struct{})
	)
	runStart := time.Now()
	go func() {
		defer close(ran)
		h, runErr = robustness.Run(ctx, survivors[0].client, cfg)
	}()
	var once sync.Once
	endFaults := func() { once.Do(func() { close(faultsDone) }) }
	defer func() {
		endFaults()
		cancel()
		<-ran
	}()

	// The faults, in order, each once the clients reached its mark.
	wait := func(i int) {
		select {
		case <-reached[i]:
		case <-ran:
			t.Fatalf("the run ended (%v) before the clients reached %d operations", runErr, marks[i])
		}
	}
	wait(0)
	t.Logf("killing %s (the leading server)", leader.node)
	leaderDead.Store(true)
	leader.kill()

	wait(1)
	victim := etcdLeader(ctx, t, c.etcd, c.members)
	t.Logf("killing %s (etcd's leader)", victim.name)
	victim.kill()

	wait(2)
	victim.restart(t)
	t.Logf("restarted %s", victim.name)

	wait(3)
	t.Logf("holding what %s sends to etcd for %s", held.node, holdFor)
	for _, p := range held.proxies {
		p.hold()
	}
	time.Sleep(holdFor) // the fault's duration, not a wait for a condition
	held.releaseEtcd()

	wait(4)
	rev := compact(ctx, t, c.etcd)
	t.Logf("compacted etcd at revision %d", rev)
	endFaults()

	<-ran
	if runErr != nil {
		t.Fatalf("seed %d: the run did not finish: %v", seed, runErr)
	}
	runTime := time.Since(runStart)
	checkStart := time.Now()
	problems := h.Check(time.Minute)
	unknown, settled := 0, 0
	outcomes := map[string]int{} // by kind and code, for the log
	for _, op := range h.Ops {
		if op.Output.Unknown {
			unknown++
		}
		outcomes[fmt.Sprintf("%s %s", op.Input.Kind, op.Output.Code)]++
	}
	for _, w := range h.Watches {
		if w.Settled {
			settled++
		}
	}
	t.Logf("seed %d: %d operations (%d of unknown outcome), %d watches (%d settled at the end); ran %s, checked in %s",
		seed, len(h.Ops), unknown, len(h.Watches), settled, runTime.Round(time.Millisecond), time.Since(checkStart).Round(time.Millisecond))
	t.Logf("outcomes: %v", outcomes)
	if len(problems) > 0 {
		t.Fatalf("robustness check failed with seed %d (rerun with -robustness.seed=%d):\n%s", seed, seed, strings.Join(problems, "\n"))
	}

	// The survivors shut down cleanly, without a data race.
	for _, s := range survivors {
		if err := s.stop(15 * time.Second); err != nil {
			t.Errorf("%s: %v\n%s", s.node, err, s.tail(20))
		}
		if strings.Contains(s.output(), "WARNING: DATA RACE") {
			t.Errorf("%s found a data race; see %s", s.node, s.log)
		}
	}
	for _, m := range c.members {
		_ = m.stop(10 * time.Second)
	}
	t.Logf("total %s", time.Since(began).Round(time.Millisecond))
}

// dialWithTimeout returns a client of the server at addr whose unary calls
// each end after timeout; it is closed when the test ends.
func dialWithTimeout(t *testing.T, addr string, timeout time.Duration) pbresource.ResourceServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
			invoker grpc.UnaryInvoker, opts ...grpc.CallOption,
		) error {
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			return invoker(ctx, method, req, reply, cc, opts...)
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pbresource.NewResourceServiceClient(conn)
}
