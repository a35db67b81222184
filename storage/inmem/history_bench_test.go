package inmem_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/loomrt/loom/internal/testkit/benchutil"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

// BenchmarkHistory measures what history costs the in-memory store's
// writes (history on next to off, in the same run: benchutil.OnOff), and the memory a
// kept version takes against the resource's marshalled size.
func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()

	b.Run("op=write-create", func(b *testing.B) {
		const storeSize = 10000
		var bes [2]*inmem.Backend
		in := [2]*pbresource.Resource{benchResource(""), benchResource("")}
		create := func(side int, opt inmem.Option) func(int) {
			return func(i int) {
				if i%storeSize == 0 {
					bes[side] = inmem.New(opt)
				}
				in[side].Id.Name = benchName(i % storeSize)
				if _, err := bes[side].WriteCAS(ctx, in[side]); err != nil {
					b.Fatal(err)
				}
			}
		}
		benchutil.OnOff(b, 256, nil, create(0, inmem.WithHistory(storage.HistoryLimits{})), create(1, inmem.WithoutHistory()))
	})

	// Every update changes the Generation, so every one is recorded.
	b.Run("op=write-update", func(b *testing.B) {
		gens := make([]string, 1024)
		for i := range gens {
			gens[i] = ulid.Make().String()
		}
		update := func(opt inmem.Option) func(int) {
			be := inmem.New(opt)
			stored, err := be.WriteCAS(ctx, benchResource("w"))
			if err != nil {
				b.Fatal(err)
			}
			in := proto.Clone(stored).(*pbresource.Resource)
			return func(i int) {
				in.Generation = gens[i%len(gens)]
				out, err := be.WriteCAS(ctx, in)
				if err != nil {
					b.Fatal(err)
				}
				in.Version = out.Version
			}
		}
		benchutil.OnOff(b, 256, nil, update(inmem.WithHistory(storage.HistoryLimits{})), update(inmem.WithoutHistory()))
	})

	b.Run("memory-per-version", func(b *testing.B) {
		for range b.N {
			on, size := heapAfterVersions(b, inmem.WithHistory(storage.HistoryLimits{}))
			off, _ := heapAfterVersions(b, inmem.WithoutHistory())
			perVersion := float64(on-off) / float64(memNames*(memVersions-1))
			b.ReportMetric(perVersion, "bytes/kept-version")
			b.ReportMetric(float64(size), "marshalled-bytes")
			b.ReportMetric(perVersion/float64(size), "ratio")
			b.ReportMetric(float64(off)/memNames, "bytes/live-resource")
		}
	})
}

// memVersions is storage.DefaultHistoryLimits.KeepVersions: every version
// written is kept.
const (
	memNames    = 2000
	memVersions = 20
)

// heapAfterVersions returns the live heap after writing memVersions
// versions (each with data of its own) of memNames resources to a new
// store made with opt, and the marshalled size of the last version
// written. The store's event log keeps one change, so that it does not
// count.
func heapAfterVersions(b *testing.B, opt inmem.Option) (heap uint64, size int) {
	ctx := context.Background()
	runtime.GC()
	be := inmem.New(opt, inmem.WithWatchLogEvents(1))
	var last *pbresource.Resource
	for n := range memNames {
		var cur *pbresource.Resource
		for v := range memVersions {
			in := benchResource(benchName(n))
			data, err := anypb.New(wrapperspb.String("a small payload for the widget, version " + strconv.Itoa(v)))
			if err != nil {
				b.Fatal(err)
			}
			in.Data = data
			if cur != nil {
				in.Id, in.Version = cur.Id, cur.Version
			}
			if cur, err = be.WriteCAS(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
		last = cur
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(be)
	return ms.HeapAlloc, proto.Size(last)
}
