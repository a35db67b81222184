package controller_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/selector"
)

// BenchmarkW2Selector is W2 with a label selection (issue 24): of n stored
// widgets, the first tenth are labelled team=payments and the rest
// team=search. In the same run, on fresh stores, a Manager without a
// selector and one that selects team=payments (WithSelector) each prime
// their cache and reconcile what it holds once, with the W1 reconciler;
// once settled, the heap each retains (heap with the Manager running
// minus heap once it stopped, as in W2) is reported: B-heap-all,
// B-heap-selected, and heap-% (selected as a percentage of all; budget
// ≤ 15). Over loopback gRPC, as a remote Manager (W2g), so the cache holds
// its own copies rather than the store's; s-primed-all and
// s-primed-selected are the times from Run until primed.
func BenchmarkW2Selector(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) { benchW2Selector(b, n) })
	}
}

func benchW2Selector(b *testing.B, n int) {
	sel := selector.MustParse("team=payments")
	var heapAll, heapSel float64
	var primedAll, primedSel time.Duration
	for i := 0; i < b.N; i++ {
		heap, primed := w2SelectionRun(b, n, selector.Everything())
		heapAll, primedAll = heapAll+float64(heap), primedAll+primed
		heap, primed = w2SelectionRun(b, n, sel)
		heapSel, primedSel = heapSel+float64(heap), primedSel+primed
	}
	runs := float64(b.N)
	b.ReportMetric(heapAll/runs, "B-heap-all")
	b.ReportMetric(heapSel/runs, "B-heap-selected")
	b.ReportMetric(100*heapSel/heapAll, "heap-%")
	b.ReportMetric(primedAll.Seconds()/runs, "s-primed-all")
	b.ReportMetric(primedSel.Seconds()/runs, "s-primed-selected")
}

// w2SelectionRun stores n widgets, a tenth of them selected by sel's
// team=payments, runs a Manager whose cache holds those sel selects until
// it has reconciled each once and settled, and returns the heap it
// retained and the time it took to prime.
func w2SelectionRun(b *testing.B, n int, sel selector.Selector) (uint64, time.Duration) {
	b.Helper()
	b.StopTimer()
	defer b.StartTimer()
	env := newBenchEnv(b, true)
	defer env.stop()
	names := widgetNames(n)
	ctx := context.Background()
	for i, w := range widgetWrites(b, names) {
		team := "search"
		if i < n/10 {
			team = "payments"
		}
		w.Resource.Metadata = map[string]string{"team": team}
		if _, err := env.writer.Write(ctx, w); err != nil {
			b.Fatal(err)
		}
	}
	// The reconciler knows the resources the Manager holds: all, or the
	// first tenth.
	held := names
	if !sel.Empty() {
		held = names[:n/10]
	}
	rec := newWidgetReconciler(held)
	runtime.GC()

	start := time.Now()
	rm := startManagerWith(b, env.ctrl, rec, func(c *controller.Controller) { c.WithSelector(widgetType, sel) })
	rm.waitPrimed(b)
	primed := time.Since(start)
	select {
	case <-rec.allOnce:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d reconciled after 5 minutes", rec.firsts.Load(), len(held))
	}
	quiesce(b, rec, len(held), nil)
	if all, err := rm.m.Cache().All(widgetType); err != nil || len(all) != len(held) {
		b.Fatalf("the cache holds %d widgets (%v), want %d", len(all), err, len(held))
	}
	with := heapAfterGC()
	rm.stop(b)
	without := heapAfterGC()
	runtime.KeepAlive(rec)
	if with < without {
		return 0, primed
	}
	return with - without, primed
}
