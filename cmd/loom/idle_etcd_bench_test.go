package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// BenchmarkIdleWatchersServerEtcd is the idle-watchers workload
// (server/watch_idle_bench_test.go's BenchmarkIdleWatchersServer) on
// `loom server -storage etcd -examples`, the binary named by LOOM_BIN
// (skipped without it; `go build -o /tmp/loom ./cmd/loom`), over an etcd
// embedded in the benchmark process (etcdtest, a fresh one per run): the
// given number of WatchList clients (on 10 connections, with gRPC's fixed
// 64 KiB stream window) read their EndOfSnapshot and stop reading, then 4
// client goroutines on another connection make 30,000 small unconditional
// writes (Bars: 10,000 creates, then updates; the example controller
// writes their statuses too). It reports the write rate, how much the
// server process's RSS grew from before the watchers connected to after
// the last write (rss-MB), its high-water mark (hwm-MB), and how many
// times the server logged that it lost its leader lease (lease-lost).
func BenchmarkIdleWatchersServerEtcd(b *testing.B) {
	bin := os.Getenv("LOOM_BIN")
	if bin == "" {
		b.Skip("set LOOM_BIN to a loom binary")
	}
	for _, watchers := range []int{0, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			for range b.N {
				benchIdleEtcd(b, bin, watchers)
			}
		})
	}
}

func benchIdleEtcd(b *testing.B, bin string, watchers int) {
	const (
		writes  = 30000
		names   = 10000
		conns   = 10
		writers = 4
	)
	b.StopTimer()
	endpoint := etcdtest.Start(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "server", "-storage", "etcd", "-etcd-endpoints", endpoint,
		"-examples", "-grpc-addr", "127.0.0.1:0", "-http-addr", "", "-log-level", "info")
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
	leader := make(chan struct{}, 1)
	var lost atomic.Int64
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				addrCh <- m[1]
			}
			switch {
			case strings.Contains(line, "became leader"):
				select {
				case leader <- struct{}{}:
				default:
				}
			case strings.Contains(line, "lost leadership") && !strings.Contains(line, "shutting down"):
				lost.Add(1)
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrCh:
	case <-time.After(30 * time.Second):
		b.Fatal("the server did not log its address")
	}
	select {
	case <-leader:
	case <-time.After(30 * time.Second):
		b.Fatal("the server did not become leader")
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
	if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: idleEtcdBar(b, "warm-up")}); err != nil {
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
			for i := w; i < writes; i += writers {
				res := idleEtcdBar(b, fmt.Sprintf("bar-%05d", i%names))
				if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: res}); err != nil {
					errs <- fmt.Errorf("write %d: %w", i, err)
					return
				}
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
	b.ReportMetric(float64(lost.Load()), "lease-lost")
	b.StartTimer()
}

func idleEtcdBar(b *testing.B, name string) *pbresource.Resource {
	data, err := anypb.New(&pbfoov1.Bar{Baz: "a small payload"})
	if err != nil {
		b.Fatal(err)
	}
	return &pbresource.Resource{
		Id: &pbresource.ID{
			Type:    foo.BarV1Type,
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
			Name:    name,
		},
		Data: data,
	}
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
