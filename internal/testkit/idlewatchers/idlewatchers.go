// Package idlewatchers is the idle-watchers workload of the benchmarks
// against a server process (issue 11): watchers that stop reading while
// writes go on.
package idlewatchers

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
)

// Workload is the idle-watchers workload against a running
// Loom server process that serves the example types: Watchers WatchList
// clients of Bars (of Zips with Zips), on 10 connections with gRPC's fixed
// 64 KiB stream window, read their EndOfSnapshot and stop reading; then
// Writers client goroutines (4 if 0) on another connection make Writes
// small unconditional writes of Bars (Zips) (Names of them: creates, then
// updates).
type Workload struct {
	Addr     string // the server's gRPC address
	PID      int    // the server's process, whose memory is measured
	Watchers int
	Writes   int
	Names    int
	Writers  int
	Zips     bool // watch and write Zips instead of Bars (W11)
}

// Result is what Measure measured.
type Result struct {
	WritesPerSec float64
	// RSSGrowth is how much the server's RSS grew from before the
	// watchers connected to after the last write; HWM its high-water mark
	// at the end. Bytes.
	RSSGrowth, HWM int64
}

// Run runs the workload with b's timer stopped but for the writes, and
// reports the write rate (writes/s), how much the server's RSS grew from
// before the watchers connected to after the last write (rss-MB), and its
// high-water mark (hwm-MB).
func (w Workload) Run(ctx context.Context, b *testing.B) {
	r := w.Measure(ctx, b)
	b.ReportMetric(r.WritesPerSec, "writes/s")
	b.ReportMetric(float64(r.RSSGrowth)/(1<<20), "rss-MB")
	b.ReportMetric(float64(r.HWM)/(1<<20), "hwm-MB")
}

// Measure is Run without reporting: it returns what it measured.
func (w Workload) Measure(ctx context.Context, b *testing.B) Result {
	const conns = 10
	writers := w.Writers
	if writers == 0 {
		writers = 4
	}
	newResource, typ := idleBar, foo.BarV1Type
	if w.Zips {
		newResource, typ = idleZip, foo.ZipType
	}
	b.StopTimer()
	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(w.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
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
	if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: newResource(b, "warm-up")}); err != nil {
		b.Fatal(err)
	}
	rss0, _ := ProcMem(w.PID)

	req := &pbresource.WatchListRequest{Type: typ, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}}
	for c := range conns {
		conn := dial()
		defer conn.Close()
		wc := pbresource.NewResourceServiceClient(conn)
		for i := c; i < w.Watchers; i += conns {
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
	for wr := range writers {
		wg.Go(func() {
			for i := wr; i < w.Writes; i += writers {
				// Unconditional: the example controller writes Bars too.
				res := newResource(b, fmt.Sprintf("res-%05d", i%w.Names))
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
	rss1, hwm := ProcMem(w.PID)
	return Result{WritesPerSec: float64(w.Writes) / elapsed.Seconds(), RSSGrowth: rss1 - rss0, HWM: hwm}
}

func idleBar(b *testing.B, name string) *pbresource.Resource {
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

func idleZip(b *testing.B, name string) *pbresource.Resource {
	data, err := anypb.New(&pbfoov1.Zip{Zap: "a small payload"})
	if err != nil {
		b.Fatal(err)
	}
	return &pbresource.Resource{
		Id:   &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: name},
		Data: data,
	}
}

// ProcMem returns the VmRSS and VmHWM of process pid, in bytes (0 where
// /proc does not tell).
func ProcMem(pid int) (rss, hwm int64) {
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
