package host_test

import (
	"context"
	"flag"
	"os"
	"testing"

	"github.com/loomrt/loom/internal/testkit/idlewatchers"
)

var w11Writes = flag.Int("w11.writes", 20000, "writes per arm of BenchmarkW11 (the workload's full size is 200000)")

// BenchmarkW11 is workload W11, idle watchers and a writer: a host as
// `loom server -dev` runs it (in memory, with the example types and
// controllers), served over gRPC on loopback; 1,000 WatchList clients of
// Zips (on 10 connections, gRPC's fixed 64 KiB stream window) read their
// EndOfSnapshot and stop reading; then one client makes -w11.writes
// sequential small Writes of Zips (10,000 names: creates, then updates).
// The peer arm is the same writes to a fresh host with no watchers, in the
// same iteration. It reports both write rates and their ratio
// (ratio-1000/0; the budget is at least 0.8). The full size:
//
//	cd host && go test -run '^$' -bench '^BenchmarkW11$' -benchtime=1x -w11.writes=200000 .
func BenchmarkW11(b *testing.B) {
	for range b.N {
		var rates [2]float64
		for i, watchers := range []int{0, 1000} {
			h := startHost(b, "-dev", "-log-level", "warn")
			ctx, cancel := context.WithCancel(context.Background())
			r := idlewatchers.Workload{Addr: h.grpcAddr, PID: os.Getpid(), Watchers: watchers,
				Writes: *w11Writes, Names: 10000, Writers: 1, Zips: true}.Measure(ctx, b)
			cancel()
			if err := h.stop(); err != nil {
				b.Fatal(err)
			}
			rates[i] = r.WritesPerSec
		}
		b.ReportMetric(rates[0], "writes/s-0")
		b.ReportMetric(rates[1], "writes/s-1000")
		b.ReportMetric(rates[1]/rates[0], "ratio-1000/0")
	}
}
