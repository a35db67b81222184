//go:build linux

package host_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/host"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
)

// fdLimitEnv makes this test binary, run again, the host of
// TestConnectionExhaustion with its limit on open files lowered to the
// variable's value.
const fdLimitEnv = "LOOM_TEST_FD_LIMIT"

// exhaustionFDs is the host's limit on open files in
// TestConnectionExhaustion: -max-conns's default is then 224, and
// -max-http-conns's 128.
const exhaustionFDs = 512

// TestConnectionExhaustion is the connection-exhaustion attack of issue
// 21 against a host whose limit on open files is low, with the limits'
// defaults: more watch-holding gRPC connections and idle HTTP keep-alives
// than the limit allows. The host holds -max-conns gRPC connections and
// refuses the rest at once; /healthz, /metrics (which needs files of its
// own) and a Read on a connection opened before still answer within 1s; a
// fresh gRPC connection is refused at once (Unavailable, not a timeout);
// and once a connection closes, a fresh one is served.
func TestConnectionExhaustion(t *testing.T) {
	if limit := os.Getenv(fdLimitEnv); limit != "" {
		runLimitedHost(t, limit)
		return
	}
	addrs, log := startLimitedHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A client connected before the attack.
	existing := pbresource.NewResourceServiceClient(dialPlain(t, addrs.GRPC))
	probe, err := existing.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "default", "probe", "x")})
	if err != nil {
		t.Fatal(err)
	}

	maxConns := metric(t, addrs.HTTP, `loom_connections_max{listener="grpc"}`)
	if want := exhaustionFDs - 128 - 128 - exhaustionFDs/16; maxConns != want {
		t.Fatalf("-max-conns defaults to %d with %d open files, want %d", maxConns, exhaustionFDs, want)
	}
	held, refused := holdWatches(ctx, t, addrs.GRPC, maxConns+100)
	if len(held) != maxConns-1 || refused != 101 {
		t.Fatalf("%d watch-holding connections held and %d refused, want %d and 101 (-max-conns %d, one connection open before)",
			len(held), refused, maxConns-1, maxConns)
	}
	if n := holdKeepAlives(t, addrs.HTTP, 200); n != 200 {
		t.Errorf("%d of 200 HTTP keep-alives answered; want all (the idle ones make room for the next)", n)
	}

	within := func(what string, fn func(context.Context) error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := fn(ctx); err != nil {
			t.Errorf("%s: %v; host log:\n%s", what, err, log)
		}
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		within("GET "+path+" on a fresh connection", func(ctx context.Context) error {
			_, err := freshGet(ctx, addrs.HTTP+path)
			return err
		})
	}
	within("a Read on a connection opened before", func(ctx context.Context) error {
		_, err := existing.Read(ctx, &pbresource.ReadRequest{Id: probe.Resource.Id})
		return err
	})
	within("a Read on a fresh connection", func(ctx context.Context) error {
		if err := freshRead(ctx, t, addrs.GRPC, probe.Resource.Id); status.Code(err) != codes.Unavailable {
			return fmt.Errorf("got %v, want the connection refused at once (Unavailable)", err)
		}
		return nil
	})
	if got := metric(t, addrs.HTTP, `loom_connections_refused_total{listener="grpc"}`); got < 101 {
		t.Errorf("loom_connections_refused_total{listener=\"grpc\"} = %d, want at least 101", got)
	}
	if got := metric(t, addrs.HTTP, `loom_connections_evicted_total{listener="http"}`); got < 200-128 {
		t.Errorf("loom_connections_evicted_total{listener=\"http\"} = %d, want at least %d", got, 200-128)
	}

	// Once a connection closes, a fresh one is served.
	held[0].Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		err := freshRead(rctx, t, addrs.GRPC, probe.Resource.Id)
		rcancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a fresh Read 5s after a connection closed: %v; host log:\n%s", err, log)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}

// startLimitedHost runs this test binary again as a host whose limit on
// open files is exhaustionFDs, with its other limits at their defaults.
func startLimitedHost(t *testing.T) (host.Addrs, *testlog.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestConnectionExhaustion$")
	// Under -race, a process sleeps a second at exit unless told not to.
	cmd.Env = append(os.Environ(), fdLimitEnv+"="+strconv.Itoa(exhaustionFDs), "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=0")
	log := &testlog.Buffer{}
	cmd.Stderr = log
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	reported := make(chan error, 1)
	var addrs host.Addrs
	go func() {
		line, err := bufio.NewReader(stdout).ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(line, &addrs)
		}
		reported <- err
		io.Copy(io.Discard, stdout) //nolint:errcheck // until the host exits
		cmd.Wait()                  //nolint:errcheck // killed: its status says nothing
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck // it may have exited
		<-exited
	})
	select {
	case err := <-reported:
		if err != nil {
			t.Fatalf("the host did not report its addresses: %v; its log:\n%s", err, log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the host did not report its addresses within 30s; its log:\n%s", log)
	}
	return addrs, log
}

// runLimitedHost is the host of TestConnectionExhaustion: it lowers its
// limit on open files to limit, serves until SIGTERM or SIGKILL, and
// writes its addresses to standard output as one JSON line.
func runLimitedHost(t *testing.T, limit string) {
	n, err := strconv.ParseUint(limit, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = host.Run(ctx, []string{"-dev", "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0"}, os.Stderr, registerExamples,
		host.WithListening(func(a host.Addrs) { json.NewEncoder(os.Stdout).Encode(a) })) //nolint:errcheck // the test sees no line
	if err != nil {
		t.Fatal(err)
	}
}

// holdWatches opens n gRPC connections to addr, each holding a WatchList
// open until the test ends, some at the same time. It returns those that
// hold one and how many were refused (Unavailable); a watch must open
// within 10s.
func holdWatches(ctx context.Context, t *testing.T, addr string, n int) (held []*grpc.ClientConn, refused int) {
	t.Helper()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
		sem  = make(chan struct{}, 16)
	)
	req := &pbresource.WatchListRequest{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}}
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Error(err)
				return
			}
			wctx, cancel := context.WithCancel(ctx)
			timer := time.AfterFunc(10*time.Second, cancel)
			w, err := pbresource.NewResourceServiceClient(conn).WatchList(wctx, req)
			if err == nil {
				_, err = w.Recv() // the first event: the watch is open
			}
			timer.Stop()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				held = append(held, conn)
				t.Cleanup(func() { cancel(); conn.Close() })
				return
			case status.Code(err) == codes.Unavailable:
				refused++
			default:
				errs = append(errs, err)
			}
			cancel()
			conn.Close()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Errorf("a watch-holding connection: %v (want it held or refused)", err)
	}
	return held, refused
}

// holdKeepAlives opens n HTTP connections to addr, each asking for
// /healthz and then left idle (keep-alive) until the test ends, and
// returns how many answered within 10s in all.
func holdKeepAlives(t *testing.T, addr string, n int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err != nil {
			return i
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(deadline) //nolint:errcheck // a failure shows as one below
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: loom\r\n\r\n"); err != nil {
			return i
		}
		rsp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return i
		}
		rsp.Body.Close()
	}
	return n
}

// freshRead reads id on a gRPC connection of its own.
func freshRead(ctx context.Context, t *testing.T, addr string, id *pbresource.ID) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = pbresource.NewResourceServiceClient(conn).Read(ctx, &pbresource.ReadRequest{Id: id})
	return err
}
