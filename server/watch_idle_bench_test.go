package server

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/loomrt/loom/internal/testkit/idlewatchers"
)

// BenchmarkIdleWatchersServer is the idle-watchers workload against a real
// `loom server -dev` process, the binary named by the environment variable
// LOOM_BIN (skipped without it; build one with
// `go build -o /tmp/loom ./cmd/loom`): the given number of WatchList
// clients (on 10 connections, with gRPC's fixed 64 KiB stream window) read
// their EndOfSnapshot and stop reading, then 4 client goroutines on another
// connection make 200,000 small unconditional writes (Bars: 10,000
// creates, then updates; the example controller that `-dev` runs writes
// their statuses too). It reports the write rate and how much the server process's
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
		writes = 200000
		names  = 10000
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
	idlewatchers.Workload{Addr: addr, PID: cmd.Process.Pid, Watchers: watchers, Writes: writes, Names: names}.Run(ctx, b)
	b.StartTimer()
}
