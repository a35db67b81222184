package server

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
)

// BenchmarkIdleWatchersServer is the idle-watchers workload against a real
// `loom server -dev` process, the binary named by the environment variable
// LOOM_BIN (skipped without it; build one with
// `go build -o /tmp/loom ./cmd/loom`): the given number of WatchList
// clients (on 10 connections, with gRPC's fixed 64 KiB stream window) read
// their EndOfSnapshot and stop reading, then 4 client goroutines on another
// connection make 200,000 small writes (Bars: 10,000 creates, then
// updates). It reports the write rate and how much the server process's
// RSS grew from before the watchers connected to after the last write
// (rss-MB), and its high-water mark (hwm-MB, VmHWM at the end).
func BenchmarkIdleWatchersServer(b *testing.B) {
	bin := os.Getenv("LOOM_BIN")
	if bin == "" {
		b.Skip("set LOOM_BIN to a loom binary")
	}
	for _, watchers := range []int{0, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			for range b.N {
				benchIdleServer(b, bin, watchers)
			}
		})
	}
}

var listeningRE = regexp.MustCompile(`gRPC server listening: addr=(\S+)`)

func benchIdleServer(b *testing.B, bin string, watchers int) {
	const (
		writes  = 200000
		names   = 10000
		conns   = 10
		writers = 4
	)
	b.StopTimer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "server", "-dev", "-grpc-addr", "127.0.0.1:0", "-http-addr", "", "-log-level", "info")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	defer cancel()
	addrCh := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				addrCh <- m[1]
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case <-time.After(30 * time.Second):
		b.Fatal("the server did not log its address")
	}
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<20))
		if err != nil {
			b.Fatal(err)
		}
		return conn
	}
	wconn := dial()
	defer wconn.Close()
	client := pbresource.NewResourceServiceClient(wconn)
	// One write first, so the server has its steady state before measuring.
	if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: idleBar(b, "warm-up")}); err != nil {
		b.Fatal(err)
	}
	rss0, _ := procMem(cmd.Process.Pid)

	req := &pbresource.WatchListRequest{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}}
	for c := range conns {
		conn := dial()
		defer conn.Close()
		wc := pbresource.NewResourceServiceClient(conn)
		for i := c; i < watchers; i += conns {
			stream, err := wc.WatchList(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			for {
				ev, err := stream.Recv()
				if err != nil {
					b.Fatal(err)
				}
				if ev.GetEndOfSnapshot() != nil {
					break
				}
			}
		}
	}

	b.StartTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			versions := map[string]string{}
			for i := w; i < writes; i += writers {
				name := fmt.Sprintf("bar-%05d", i%names)
				res := idleBar(b, name)
				res.Version = versions[name]
				rsp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: res})
				if err != nil {
					errs <- fmt.Errorf("write %d: %w", i, err)
					return
				}
				versions[name] = rsp.Resource.Version
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	rss1, hwm := procMem(cmd.Process.Pid)
	b.ReportMetric(writes/elapsed.Seconds(), "writes/s")
	b.ReportMetric(float64(rss1-rss0)/(1<<20), "rss-MB")
	b.ReportMetric(float64(hwm)/(1<<20), "hwm-MB")
	b.StartTimer()
}

func idleBar(b *testing.B, name string) *pbresource.Resource {
	id := barID(name)
	id.Tenancy = &pbresource.Tenancy{Partition: "default", Namespace: "default"}
	return &pbresource.Resource{Id: id, Data: mustAny(b, &pbfoov1.Bar{Baz: "a small payload"})}
}

// procMem returns the VmRSS and VmHWM of process pid, in bytes.
func procMem(pid int) (rss, hwm int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		field := func(prefix string) (int64, bool) {
			rest, ok := strings.CutPrefix(line, prefix)
			if !ok {
				return 0, false
			}
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, true
		}
		if v, ok := field("VmRSS:"); ok {
			rss = v
		}
		if v, ok := field("VmHWM:"); ok {
			hwm = v
		}
	}
	return rss, hwm
}
