package controller_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/reconcile"
)

// BenchmarkW13p is workload W13p, a fresh change during a restart: 100,000
// resources in the store, a Manager starts (as after a restart) and queues
// them all; while it works through them (4 workers, each reconcile 100 µs,
// as a call to an outside API), 100 new resources are written one by one,
// 10 ms apart. It reports the p50 and p99 time from each write to the
// start of its reconcile, with the priority queue (the start-up backlog at
// low priority) and as a FIFO queue would do it.
func BenchmarkW13p(b *testing.B) {
	const n, fresh, workers = 100_000, 100, 4
	const work, pause = 100 * time.Microsecond, 10 * time.Millisecond
	env := newBenchEnv(b, false)
	defer env.stop()
	ctx := context.Background()
	for _, w := range widgetWrites(b, widgetNames(n)) {
		if _, err := env.writer.Write(ctx, w); err != nil {
			b.Fatal(err)
		}
	}
	round := 0
	for _, mode := range []string{"priority", "fifo"} {
		b.Run(mode, func(b *testing.B) {
			var lat []time.Duration
			for i := 0; i < b.N; i++ {
				round++
				prefix := fmt.Sprintf("fresh-%d-", round)
				var written, reconciled sync.Map
				var reconciles atomic.Int64
				var got atomic.Int64
				rec := reconcile.ReconcileFunc(func(_ context.Context, _ reconcile.Runtime, req reconcile.Request) error {
					reconciles.Add(1)
					if strings.HasPrefix(req.ID.Name, prefix) {
						if _, dup := reconciled.LoadOrStore(req.ID.Name, time.Now()); !dup {
							got.Add(1)
						}
					}
					time.Sleep(work)
					return nil
				})
				rm := startManagerWith(b, env.ctrl, rec, func(c *controller.Controller) {
					c.WithConcurrency(workers)
					if mode == "fifo" {
						controller.QueueFIFO(c)
					}
				})
				rm.waitPrimed(b)
				for reconciles.Load() == 0 {
					time.Sleep(time.Millisecond)
				}
				for j, w := range widgetWrites(b, widgetNames(fresh)) {
					w.Resource.Id.Name = fmt.Sprintf("%s%d", prefix, j)
					written.Store(w.Resource.Id.Name, time.Now())
					if _, err := env.writer.Write(ctx, w); err != nil {
						b.Fatal(err)
					}
					time.Sleep(pause)
				}
				deadline := time.Now().Add(5 * time.Minute)
				for got.Load() < fresh {
					if time.Now().After(deadline) {
						b.Fatalf("%d of %d fresh resources reconciled", got.Load(), fresh)
					}
					time.Sleep(time.Millisecond)
				}
				written.Range(func(k, v any) bool {
					at, _ := reconciled.Load(k)
					lat = append(lat, at.(time.Time).Sub(v.(time.Time)))
					return true
				})
				rm.stop(b)
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
