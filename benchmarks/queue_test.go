package benchmarks

// Workloads W3, W4 and W5 on Loom's controller/queue and on client-go's
// workqueue (the rate-limiting queue a controller-runtime controller gets,
// with the Prometheus metrics controller-runtime installs, and without
// metrics).

import (
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/controller/queue"
	"github.com/loomrt/loom/internal/testkit/benchutil"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// benchKey is a controller's request key in both queues: tenancy and name
// for Loom, what reconcile.Request (namespace and name) is for
// controller-runtime.
type benchKey struct{ partition, namespace, name string }

func keys(n int) []benchKey {
	out := make([]benchKey, n)
	for i := range out {
		out[i] = benchKey{"default", "default", fmt.Sprintf("res-%d", i)}
	}
	return out
}

// workQueue is what the workloads need from a queue. The implementations
// call the queues directly; the interface only costs one indirect call per
// operation, the same for both.
type workQueue interface {
	Add(k benchKey)
	AddAfter(k benchKey, d time.Duration)
	// work runs n workers that Get and Done with an empty reconcile,
	// counting the keys they were handed, until the queue shuts down.
	work(n int, handed *atomic.Int64) *sync.WaitGroup
	// finish waits until every key added so far was handed out and done
	// (nothing waiting or in progress), then shuts the queue down.
	finish()
	// shutDown stops the queue; its workers return.
	shutDown()
}

type impl struct {
	name string
	new  func(b *testing.B) workQueue
}

var queueImpls = []impl{
	{"loom", newLoomQueue},
	{"client-go", func(b *testing.B) workQueue { return newClientGoQueue(b, true) }},
	{"client-go-nometrics", func(b *testing.B) workQueue { return newClientGoQueue(b, false) }},
}

// --- Loom ---

type loomQueue struct {
	q *queue.Queue[benchKey, struct{}]
}

func newLoomQueue(b *testing.B) workQueue {
	v, err := queue.NewMetricsVec(prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	return loomQueue{queue.New[benchKey, struct{}](queue.Options{Metrics: v.For("bench")})}
}

func (l loomQueue) Add(k benchKey)                       { l.q.Add(k, struct{}{}) }
func (l loomQueue) AddAfter(k benchKey, d time.Duration) { l.q.AddAfter(k, struct{}{}, d) }
func (l loomQueue) shutDown()                            { l.q.ShutDown() }

func (l loomQueue) work(n int, handed *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				got, ok := l.q.Get()
				if !ok {
					return
				}
				handed.Add(1)
				l.q.Done(got)
			}
		})
	}
	return &wg
}

func (l loomQueue) finish() {
	for !l.q.Idle() {
		time.Sleep(50 * time.Microsecond)
	}
	l.q.ShutDown()
}

// --- client-go ---

type clientGoQueue struct {
	q workqueue.TypedRateLimitingInterface[benchKey]
}

func newClientGoQueue(b *testing.B, metrics bool) workQueue {
	cfg := workqueue.TypedRateLimitingQueueConfig[benchKey]{}
	if metrics {
		cfg.Name = "bench"
		cfg.MetricsProvider = newPrometheusProvider(b, prometheus.NewRegistry())
	}
	// controller-runtime's default rate limiter.
	limiter := workqueue.DefaultTypedControllerRateLimiter[benchKey]()
	return clientGoQueue{workqueue.NewTypedRateLimitingQueueWithConfig(limiter, cfg)}
}

func (c clientGoQueue) Add(k benchKey)                       { c.q.Add(k) }
func (c clientGoQueue) AddAfter(k benchKey, d time.Duration) { c.q.AddAfter(k, d) }
func (c clientGoQueue) shutDown()                            { c.q.ShutDown() }

func (c clientGoQueue) work(n int, handed *atomic.Int64) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				k, shutdown := c.q.Get()
				if shutdown {
					return
				}
				handed.Add(1)
				c.q.Done(k)
			}
		})
	}
	return &wg
}

// finish shuts down with drain: it returns once nothing is in progress;
// keys re-queued by Done are still handed out, and the workers return when
// the queue is empty (the caller waits for them).
func (c clientGoQueue) finish() { c.q.ShutDownWithDrain() }

// BenchmarkW3 is workload W3: one producer adds 100,000 distinct keys while
// W workers (1 and 4) Get and Done them with an empty reconcile.
func BenchmarkW3(b *testing.B) {
	const n = 100_000
	ks := keys(n)
	for _, workers := range []int{1, 4} {
		workload := fmt.Sprintf("W3/workers=%d", workers)
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for _, im := range queueImpls {
				b.Run("impl="+im.name, func(b *testing.B) {
					var tot benchutil.Totals
					for range b.N {
						q := im.new(b)
						var handed atomic.Int64
						span := benchutil.Start()
						wg := q.work(workers, &handed)
						for _, k := range ks {
							q.Add(k)
						}
						for handed.Load() < n {
							time.Sleep(50 * time.Microsecond)
						}
						q.shutDown()
						wg.Wait()
						tot.Add(span.Stop(), n)
					}
					tot.Report(b)
					cpu := float64(tot.CPU.Nanoseconds()) / float64(tot.Items)
					if im.name == "loom" {
						recordLoom(b, workload, "cpu-ns/item", cpu)
					} else {
						reportRatio(b, workload, "cpu-ns/item", cpu)
					}
				})
			}
		})
	}
}

// BenchmarkW4 is workload W4: 1,000,000 adds cycling over 1,000 keys while
// four workers drain; process CPU per add until all work is done, and how
// many keys the workers were handed (the rest were de-duplicated).
func BenchmarkW4(b *testing.B) {
	const adds, distinct = 1_000_000, 1_000
	ks := keys(distinct)
	for _, im := range queueImpls {
		b.Run("impl="+im.name, func(b *testing.B) {
			var cpu time.Duration
			var handedTotal int64
			for range b.N {
				q := im.new(b)
				var handed atomic.Int64
				wg := q.work(4, &handed)
				start := benchutil.CPUTime()
				for j := range adds {
					q.Add(ks[j%distinct])
				}
				q.finish()
				wg.Wait()
				cpu += benchutil.CPUTime() - start
				handedTotal += handed.Load()
			}
			perAdd := float64(cpu.Nanoseconds()) / float64(b.N*adds)
			b.ReportMetric(perAdd, "cpu-ns/add")
			b.ReportMetric(float64(handedTotal)/float64(b.N), "handed")
			if im.name == "loom" {
				recordLoom(b, "W4", "cpu-ns/add", perAdd)
			} else {
				reportRatio(b, "W4", "cpu-ns/add", perAdd)
			}
		})
	}
}

// BenchmarkW5 is workload W5: 100,000 keys added with delays uniform in
// [0, 10 ms) (seed 42), four workers; time until all were handed out, and
// the producer's wall time per AddAfter.
func BenchmarkW5(b *testing.B) {
	const n = 100_000
	ks := keys(n)
	rng := rand.New(rand.NewSource(42))
	delays := make([]time.Duration, n)
	for i := range delays {
		delays[i] = time.Duration(rng.Int63n(int64(10 * time.Millisecond)))
	}
	for _, im := range queueImpls {
		b.Run("impl="+im.name, func(b *testing.B) {
			var drainTotal, addTotal time.Duration
			for range b.N {
				q := im.new(b)
				var handed atomic.Int64
				wg := q.work(4, &handed)
				start := time.Now()
				for j, k := range ks {
					q.AddAfter(k, delays[j])
				}
				addTotal += time.Since(start)
				for handed.Load() < n {
					time.Sleep(50 * time.Microsecond)
				}
				drainTotal += time.Since(start)
				q.shutDown()
				wg.Wait()
			}
			ms := float64(drainTotal.Microseconds()) / 1000 / float64(b.N)
			b.ReportMetric(ms, "ms-drain")
			b.ReportMetric(float64(addTotal.Nanoseconds())/float64(b.N*n), "ns/add")
			if im.name == "loom" {
				recordLoom(b, "W5", "ms-drain", ms)
			} else {
				reportRatio(b, "W5", "ms-drain", ms)
			}
		})
	}
}
