package queue

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/internal/benchutil"
	"github.com/prometheus/client_golang/prometheus"
)

type benchKey struct{ partition, namespace, name string }

func benchMetrics(b *testing.B) *Metrics {
	v, err := NewMetricsVec(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	return v.For("bench")
}

func keys(n int) []benchKey {
	out := make([]benchKey, n)
	for i := range out {
		out[i] = benchKey{"default", "default", fmt.Sprintf("res-%d", i)}
	}
	return out
}

// drain runs workers that Get and Done until the queue shuts down, counting
// the keys they were handed.
func drain(q *Queue[benchKey, struct{}], workers int, handed *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, ok := q.Get()
				if !ok {
					return
				}
				handed.Add(1)
				q.Done(got)
			}
		}()
	}
	return &wg
}

// BenchmarkW3 is workload W3: one producer adds 100,000 distinct keys while
// W workers Get and Done them with an empty reconcile, metrics on.
func BenchmarkW3(b *testing.B) {
	const n = 100_000
	ks := keys(n)
	for _, workers := range []int{1, 4} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			var tot benchutil.Totals
			for i := 0; i < b.N; i++ {
				q := New[benchKey, struct{}](Options{Metrics: benchMetrics(b)})
				var handed atomic.Int64
				span := benchutil.Start()
				wg := drain(q, workers, &handed)
				for _, k := range ks {
					q.Add(k, struct{}{})
				}
				for handed.Load() < n {
					time.Sleep(50 * time.Microsecond)
				}
				q.ShutDown()
				wg.Wait()
				tot.Add(span.Stop(), n)
			}
			tot.Report(b)
		})
	}
}

// BenchmarkW4 is workload W4: 1,000,000 adds cycling over 1,000 keys while
// four workers drain, metrics on.
func BenchmarkW4(b *testing.B) {
	const adds, distinct = 1_000_000, 1_000
	ks := keys(distinct)
	var cpu time.Duration
	var handedTotal int64
	for i := 0; i < b.N; i++ {
		q := New[benchKey, struct{}](Options{Metrics: benchMetrics(b)})
		var handed atomic.Int64
		wg := drain(q, 4, &handed)
		start := benchutil.CPUTime()
		for j := 0; j < adds; j++ {
			q.Add(ks[j%distinct], struct{}{})
		}
		for !q.Idle() {
			time.Sleep(50 * time.Microsecond)
		}
		cpu += benchutil.CPUTime() - start
		q.ShutDown()
		wg.Wait()
		handedTotal += handed.Load()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*adds), "cpu-ns/add")
	b.ReportMetric(float64(handedTotal)/float64(b.N), "handed")
}

// BenchmarkW5 is workload W5: 100,000 keys added with delays uniform in
// [0, 10 ms) (seed 42), four workers; time until all were handed out.
func BenchmarkW5(b *testing.B) {
	const n = 100_000
	ks := keys(n)
	rng := rand.New(rand.NewSource(42))
	delays := make([]time.Duration, n)
	for i := range delays {
		delays[i] = time.Duration(rng.Int63n(int64(10 * time.Millisecond)))
	}
	var drainTotal, addTotal time.Duration
	for i := 0; i < b.N; i++ {
		q := New[benchKey, struct{}](Options{Metrics: benchMetrics(b)})
		var handed atomic.Int64
		wg := drain(q, 4, &handed)
		start := time.Now()
		for j, k := range ks {
			q.AddAfter(k, struct{}{}, delays[j])
		}
		addTotal += time.Since(start)
		for handed.Load() < n {
			time.Sleep(50 * time.Microsecond)
		}
		drainTotal += time.Since(start)
		q.ShutDown()
		wg.Wait()
	}
	b.ReportMetric(float64(drainTotal.Milliseconds())/float64(b.N), "ms-drain")
	b.ReportMetric(float64(addTotal.Nanoseconds())/float64(b.N*n), "ns/add")
}

// BenchmarkReAdd is the queue's part of W1: a burst of 10,000 keys, one
// worker, and each key added once more lag Dones after its first Done (the
// event of the status write its reconcile made), metrics on. Parked items
// serve the second add.
func BenchmarkReAdd(b *testing.B) {
	for _, lag := range []int{0, 8, 64} {
		b.Run(fmt.Sprintf("lag=%d", lag), func(b *testing.B) {
			const n = 10000
			ks := keys(n)
			m := benchMetrics(b)
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				q := New[benchKey, int](Options{Metrics: m})
				for _, k := range ks {
					q.Add(k, 1)
				}
				var pending []benchKey
				for q.Len() > 0 {
					got, _ := q.Get()
					q.Done(got)
					if got.Value == 1 {
						pending = append(pending, got.Key)
					}
					if len(pending) > lag {
						q.Add(pending[0], 2)
						pending = pending[1:]
					}
					if q.Len() == 0 {
						for _, k := range pending {
							q.Add(k, 2)
						}
						pending = nil
					}
				}
			}
		})
	}
}
