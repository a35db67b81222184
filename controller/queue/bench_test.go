package queue

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/internal/testkit/benchutil"
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

// BenchmarkW13s is workload W13s, starvation: 32 workers, each hand-out
// taking 1 ms (a sleep), a stream of Normal keys at 90% of what the
// workers can take, and 10,000 Low keys queued at once. It reports the
// longest time a Low key waited for a worker (max-wait-ms), the aging
// bound (bound-ms), the bound the queue promises the last Low key
// (promised-ms: the aging bound plus two hand-outs per Low key ahead of
// it, at the hand-out rate measured) and how busy the workers were. The
// spare 10% would need about 4 s to hand the Low keys out; from the aging
// bound on, Low and Normal keys take turns.
func BenchmarkW13s(b *testing.B) {
	for _, bound := range []time.Duration{DefaultAgingBound, time.Second} {
		b.Run(fmt.Sprintf("bound=%s", bound), func(b *testing.B) { benchW13s(b, bound) })
	}
}

func benchW13s(b *testing.B, bound time.Duration) {
	const workers, lows = 32, 10_000
	const work = time.Millisecond
	// What a sleep of work takes here, so that the load is 90% of the
	// workers' real capacity.
	start := time.Now()
	for i := 0; i < 50; i++ {
		time.Sleep(work)
	}
	perItem := time.Since(start) / 50
	rate := 0.9 * float64(workers) / perItem.Seconds() // Normal keys per second
	var maxWait, promised, busy, elapsed time.Duration
	for i := 0; i < b.N; i++ {
		q := New[benchKey, time.Time](Options{AgingBound: bound})
		var lowLeft atomic.Int64
		lowLeft.Store(lows)
		var mu sync.Mutex
		var longest, worked time.Duration
		var handed atomic.Int64
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
					t0 := time.Now()
					handed.Add(1)
					if got.Priority == Low {
						mu.Lock()
						longest = max(longest, t0.Sub(got.Value))
						mu.Unlock()
						lowLeft.Add(-1)
					}
					time.Sleep(work)
					mu.Lock()
					worked += time.Since(t0)
					mu.Unlock()
					q.Done(got)
				}
			}()
		}
		begin := time.Now()
		for j := 0; j < lows; j++ {
			q.AddPriority(benchKey{"default", "low", fmt.Sprintf("low-%d", j)}, begin, Low)
		}
		added := 0
		for lowLeft.Load() > 0 {
			time.Sleep(time.Millisecond)
			now := time.Now()
			for due := int(rate * now.Sub(begin).Seconds()); added < due; added++ {
				q.Add(benchKey{"default", "normal", fmt.Sprintf("n-%d", added)}, now)
			}
		}
		span := time.Since(begin)
		q.ShutDownNow()
		wg.Wait()
		maxWait = max(maxWait, longest)
		promised = max(promised, bound+2*lows*span/time.Duration(handed.Load()))
		busy += worked
		elapsed += span * workers
	}
	b.ReportMetric(float64(maxWait.Microseconds())/1000, "max-wait-ms")
	b.ReportMetric(float64(bound.Milliseconds()), "bound-ms")
	b.ReportMetric(float64(promised.Milliseconds()), "promised-ms")
	b.ReportMetric(100*busy.Seconds()/elapsed.Seconds(), "busy-%")
}
