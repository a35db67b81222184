package inmem_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

var (
	benchType    = &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"}
	benchTenancy = &pbresource.Tenancy{Partition: "default", Namespace: "default"}
)

// benchResource returns a resource of a realistic size: ULIDs, a little
// metadata and a small data payload.
func benchResource(name string) *pbresource.Resource {
	data, err := anypb.New(wrapperspb.String("a small payload for the widget " + name))
	if err != nil {
		panic(err)
	}
	return &pbresource.Resource{
		Id: &pbresource.ID{
			Uid:     ulid.Make().String(),
			Name:    name,
			Type:    benchType,
			Tenancy: benchTenancy,
		},
		Generation: ulid.Make().String(),
		Metadata:   map[string]string{"owner-team": "bench"},
		Data:       data,
	}
}

func benchName(i int) string { return fmt.Sprintf("widget-%06d", i) }

// fill writes n resources and returns what was stored.
func fill(b *testing.B, be storage.Backend, n int) []*pbresource.Resource {
	b.Helper()
	out := make([]*pbresource.Resource, n)
	for i := range n {
		res, err := be.WriteCAS(context.Background(), benchResource(benchName(i)))
		if err != nil {
			b.Fatal(err)
		}
		out[i] = res
	}
	return out
}

// reportCPU reports the process CPU time per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	if cpu := processCPU() - start; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func BenchmarkInmemWrite(b *testing.B) {
	ctx := context.Background()

	// Creates into a store that holds up to 10,000 resources of the type,
	// then starts over with an empty one, so the figure does not depend on
	// how large b.N lets the store grow.
	b.Run("create", func(b *testing.B) {
		const storeSize = 10000
		be := inmem.New()
		names := make([]string, storeSize)
		for i := range names {
			names[i] = benchName(i)
		}
		// The backend copies its input, so one message can be reused.
		in := benchResource("")
		b.ReportAllocs()
		cpu := processCPU()
		b.ResetTimer()
		for i := range b.N {
			if i%storeSize == 0 && i > 0 {
				be = inmem.New()
			}
			in.Id.Name = names[i%storeSize]
			if _, err := be.WriteCAS(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportCPU(b, cpu)
	})

	b.Run("update", func(b *testing.B) {
		be := inmem.New()
		in := proto.Clone(fill(b, be, 1)[0]).(*pbresource.Resource)
		b.ReportAllocs()
		cpu := processCPU()
		b.ResetTimer()
		for range b.N {
			out, err := be.WriteCAS(ctx, in)
			if err != nil {
				b.Fatal(err)
			}
			in.Version = out.Version
		}
		b.StopTimer()
		reportCPU(b, cpu)
	})

	b.Run("update-4g", func(b *testing.B) {
		be := inmem.New()
		stored := fill(b, be, 64)
		var next atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(2) // 4 goroutines on the 2-core machine
		cpu := processCPU()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			in := proto.Clone(stored[next.Add(1)-1]).(*pbresource.Resource)
			for pb.Next() {
				out, err := be.WriteCAS(ctx, in)
				if err != nil {
					b.Error(err)
					return
				}
				in.Version = out.Version
			}
		})
		b.StopTimer()
		reportCPU(b, cpu)
	})
}

func BenchmarkInmemRead(b *testing.B) {
	ctx := context.Background()
	be := inmem.New()
	stored := fill(b, be, 10000)
	ids := make([]*pbresource.ID, len(stored))
	for i, res := range stored {
		ids[i] = proto.Clone(res.Id).(*pbresource.ID)
	}

	b.Run("1g", func(b *testing.B) {
		b.ReportAllocs()
		cpu := processCPU()
		b.ResetTimer()
		for i := range b.N {
			if _, err := be.Read(ctx, storage.EventualConsistency, ids[i%len(ids)]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		reportCPU(b, cpu)
	})

	b.Run("4g", func(b *testing.B) {
		var seed atomic.Int64
		b.ReportAllocs()
		b.SetParallelism(2)
		cpu := processCPU()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(997))
			for pb.Next() {
				if _, err := be.Read(ctx, storage.EventualConsistency, ids[i%len(ids)]); err != nil {
					b.Error(err)
					return
				}
				i++
			}
		})
		b.StopTimer()
		reportCPU(b, cpu)
	})
}

func BenchmarkInmemList10k(b *testing.B) {
	ctx := context.Background()
	be := inmem.New()
	fill(b, be, 10000)
	typ := storage.UnversionedTypeFrom(benchType)
	// The first List sorts what was created; the benchmark measures the
	// steady state.
	if _, err := be.List(ctx, storage.EventualConsistency, typ, benchTenancy, ""); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := processCPU()
	b.ResetTimer()
	for range b.N {
		list, err := be.List(ctx, storage.EventualConsistency, typ, benchTenancy, "")
		if err != nil {
			b.Fatal(err)
		}
		if len(list) != 10000 {
			b.Fatalf("listed %d resources", len(list))
		}
	}
	b.StopTimer()
	reportCPU(b, cpu)
}

// BenchmarkW8Backend is workload W8 at the backend level: 100 WatchList
// consumers on one type, 10,000 writes from one goroutine; an iteration ends
// when every consumer has seen every write. It reports the events delivered
// per second in total and the 99th percentile of the delay between the
// start of a write and its delivery to a consumer (the median over the
// iterations).
func BenchmarkW8Backend(b *testing.B) {
	const (
		watchers  = 100
		writes    = 10000
		lagSample = 10 // time one event in lagSample per watcher
	)
	ctx := context.Background()
	typ := storage.UnversionedTypeFrom(benchType)
	inputs := make([]*pbresource.Resource, writes)
	for i := range inputs {
		inputs[i] = benchResource(benchName(i))
	}

	var (
		totalEvents  float64
		totalElapsed time.Duration
		p99s         []time.Duration
		totalCPU     time.Duration
	)
	b.ResetTimer()
	for range b.N {
		be := inmem.New()
		sent := make([]int64, writes) // ns since start, set before each write
		lags := make([][]int64, watchers)
		errs := make(chan error, watchers)
		var wg sync.WaitGroup
		var ready sync.WaitGroup
		var start time.Time
		for w := range watchers {
			watch, err := be.WatchList(ctx, typ, benchTenancy, "")
			if err != nil {
				b.Fatal(err)
			}
			lags[w] = make([]int64, 0, writes/lagSample+1)
			ready.Add(1)
			wg.Go(func() {
				defer watch.Close()
				ev, err := watch.Next(ctx)
				ready.Done()
				if err != nil || ev.GetEndOfSnapshot() == nil {
					errs <- fmt.Errorf("want EndOfSnapshot, got %v, %v", ev, err)
					return
				}
				for i := range writes {
					if _, err := watch.Next(ctx); err != nil {
						errs <- err
						return
					}
					// Reading the clock costs about as much as Next, so
					// only a sample of the events is timed.
					if (i+w)%lagSample == 0 {
						lags[w] = append(lags[w], int64(time.Since(start))-sent[i])
					}
				}
			})
		}
		ready.Wait()

		cpu := processCPU()
		start = time.Now()
		for i, in := range inputs {
			sent[i] = int64(time.Since(start))
			if _, err := be.WriteCAS(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		elapsed := time.Since(start)
		totalCPU += processCPU() - cpu
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}

		b.StopTimer()
		all := make([]int64, 0, watchers*(writes/lagSample+1))
		for _, l := range lags {
			all = append(all, l...)
		}
		slices.Sort(all)
		p99s = append(p99s, time.Duration(all[len(all)*99/100]))
		totalEvents += watchers * writes
		totalElapsed += elapsed
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(totalEvents/totalElapsed.Seconds(), "events/s")
	slices.Sort(p99s)
	b.ReportMetric(float64(p99s[len(p99s)/2].Microseconds())/1000, "ms-p99-lag")
	if totalCPU > 0 {
		b.ReportMetric(float64(totalCPU.Nanoseconds())/totalEvents, "cpu-ns/event")
	}
}
