package inmem_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

// BenchmarkIdleWatchers is the idle-watchers workload: the given number of
// watches read their EndOfSnapshot and then stop reading, while one
// goroutine makes 200,000 small writes (10,000 creates, then updates of
// those names). It reports the write rate, and how much the heap (in use
// after a GC, watches still open) and the process RSS grew from before the
// watches were opened to after the last write. Compare watchers=1000 with
// watchers=0 from the same run.
func BenchmarkIdleWatchers(b *testing.B) {
	for _, watchers := range []int{0, 1000} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			benchIdleWatchers(b, watchers)
		})
	}
}

func benchIdleWatchers(b *testing.B, watchers int) {
	const (
		writes = 200000
		names  = 10000
	)
	ctx := context.Background()
	typ := storage.UnversionedTypeFrom(benchType)
	bases := make([]*pbresource.Resource, names)
	for i := range bases {
		bases[i] = benchResource(benchName(i))
	}
	var rate, heapMB, rssMB []float64
	for range b.N {
		b.StopTimer()
		heap0, rss0 := memNow()
		be := inmem.New()
		ws := make([]storage.Watch, watchers)
		for i := range ws {
			w, err := be.WatchList(ctx, typ, benchTenancy, "")
			if err != nil {
				b.Fatal(err)
			}
			if ev, err := w.Next(ctx); err != nil || ev.GetEndOfSnapshot() == nil {
				b.Fatalf("want EndOfSnapshot, got %v, %v", ev, err)
			}
			ws[i] = w
		}
		stored := make([]*pbresource.Resource, names)
		b.StartTimer()
		start := time.Now()
		for i := range writes {
			base := bases[i%names]
			in := &pbresource.Resource{Id: base.Id, Generation: base.Generation, Metadata: base.Metadata, Data: base.Data}
			if prev := stored[i%names]; prev != nil {
				in.Version = prev.Version
			}
			res, err := be.WriteCAS(ctx, in)
			if err != nil {
				b.Fatal(err)
			}
			stored[i%names] = res
		}
		elapsed := time.Since(start)
		b.StopTimer()
		rss1 := rssBytes()
		heap1, _ := memNow()
		rate = append(rate, writes/elapsed.Seconds())
		heapMB = append(heapMB, float64(heap1-heap0)/(1<<20))
		rssMB = append(rssMB, float64(rss1-rss0)/(1<<20))
		for _, w := range ws {
			w.Close()
		}
		runtime.KeepAlive(be)
		b.StartTimer()
	}
	b.ReportMetric(median(rate), "writes/s")
	b.ReportMetric(median(heapMB), "heap-MB")
	b.ReportMetric(median(rssMB), "rss-MB")
}

// memNow collects garbage, returns memory to the OS and reports the heap in
// use and the RSS.
func memNow() (heap, rss int64) {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse), rssBytes()
}

// rssBytes returns the process's resident set size (0 where /proc is
// missing).
func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}
