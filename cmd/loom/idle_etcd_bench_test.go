package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/internal/testkit/idlewatchers"
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
		writes = 30000
		names  = 10000
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
	idlewatchers.Workload{Addr: addr, PID: cmd.Process.Pid, Watchers: watchers, Writes: writes, Names: names}.Run(ctx, b)
	b.ReportMetric(float64(lost.Load()), "lease-lost")
	b.StartTimer()
}
