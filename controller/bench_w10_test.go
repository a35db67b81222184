package controller_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
)

// BenchmarkW10 is workload W10, resume: a remote Manager (loopback gRPC)
// caches 100,000 resources; its stream breaks, 1,000 of them are updated
// meanwhile, then the stream may re-open. It measures, per break, the time
// from the re-open until the cache holds the last update (ms-to-current)
// and the bytes of the events the new stream carried (proto.Size; the gRPC
// framing adds 5 bytes an event), for a stream resumed from the cache's
// version (resume) and for one whose since_version the server ignores, so
// the whole type is sent again (reprime). The first break comes once every
// resource was reconciled after priming.
func BenchmarkW10(b *testing.B) {
	for _, mode := range []string{"resume", "reprime"} {
		b.Run(mode, func(b *testing.B) { benchW10(b, 100_000, 1_000, mode == "reprime") })
	}
}

func benchW10(b *testing.B, n, changes int, reprime bool) {
	names := widgetNames(n)
	env := newBenchEnv(b, true)
	defer env.stop()
	ctx := context.Background()
	for _, w := range widgetWrites(b, names) {
		if _, err := env.writer.Write(ctx, w); err != nil {
			b.Fatal(err)
		}
	}
	client := &breakableClient{ResourceServiceClient: env.ctrl, ignoreSince: reprime}
	var reconciled atomic.Int64
	rm := startManager(b, client, reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error {
		reconciled.Add(1)
		return nil
	}))
	defer rm.stop(b)
	rm.waitPrimed(b)
	// The breaks start once the Manager has settled: priming queues every
	// resource for a first reconcile, and while the workers go through
	// those 100,000 (a few hundred ms), they compete with the watcher for
	// the cores and the first breaks measure that backlog, not the resume.
	for deadline := time.Now().Add(time.Minute); reconciled.Load() < int64(n); {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d resources reconciled a minute after priming", reconciled.Load(), n)
		}
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}

	var elapsed time.Duration
	var bytes int
	b.ResetTimer()
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		client.breakStreams()
		var last *pbresource.Resource
		for j := range changes {
			data, err := anypb.New(wrapperspb.String(fmt.Sprintf("round-%d-%d", i, j)))
			if err != nil {
				b.Fatal(err)
			}
			rsp, err := env.writer.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
				Id: widgetID(names[(i*changes+j*97)%n]), Data: data}})
			if err != nil {
				b.Fatal(err)
			}
			last = rsp.Resource
		}
		streams := len(client.streams)
		b.StartTimer()
		start := time.Now()
		client.reopen()
		for {
			got, err := rm.m.Cache().GetByID(last.Id)
			if err != nil {
				b.Fatal(err)
			}
			if got != nil && got.Version == last.Version {
				break
			}
			if time.Since(start) > time.Minute {
				b.Fatalf("the cache did not get the last update within a minute")
			}
			time.Sleep(50 * time.Microsecond) // polling a condition, with a deadline
		}
		took := time.Since(start)
		elapsed += took
		b.StopTimer()
		s, ok := client.stream(streams)
		if !ok {
			b.Fatal("no new stream")
		}
		if !reprime && (s.endOfSnapshot != 0 || s.newSnap != 0) {
			b.Fatalf("the stream did not resume: %+v", s)
		}
		bytes += s.bytes
		if testing.Verbose() {
			b.Logf("stream opened +%s, first event +%s, last +%s, cache current +%s",
				s.opened.Sub(start), s.first.Sub(start), s.last.Sub(start), took)
		}
	}
	b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N), "ms-to-current")
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes")
	b.ReportMetric(0, "ns/op")
}
