// Package benchutil measures what the benchmark workloads report beyond
// wall time: process CPU time and heap allocations over a span of work.
package benchutil

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// CPUTime returns the CPU time (user + system) the process has used so far.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Span measures wall time, process CPU time and allocations between Start
// and the calls that read it.
type Span struct {
	wall    time.Time
	cpu     time.Duration
	mallocs uint64
}

// Start begins a span.
func Start() Span {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Span{wall: time.Now(), cpu: CPUTime(), mallocs: ms.Mallocs}
}

// Result is what a Span measured.
type Result struct {
	Wall   time.Duration
	CPU    time.Duration
	Allocs uint64
}

// Stop ends the span.
func (s Span) Stop() Result {
	wall := time.Since(s.wall)
	cpu := CPUTime() - s.cpu
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return Result{Wall: wall, CPU: cpu, Allocs: ms.Mallocs - s.mallocs}
}

// Totals accumulates results over a benchmark's iterations.
type Totals struct {
	Result
	Items int
}

// Add records one iteration that handled items units of work.
func (t *Totals) Add(r Result, items int) {
	t.Wall += r.Wall
	t.CPU += r.CPU
	t.Allocs += r.Allocs
	t.Items += items
}

// Report attaches per-item figures to b, in the units BENCHMARKS.md names.
func (t *Totals) Report(b *testing.B) {
	if t.Items == 0 {
		return
	}
	n := float64(t.Items)
	b.ReportMetric(float64(t.Wall.Nanoseconds())/n, "ns/item")
	b.ReportMetric(float64(t.CPU.Nanoseconds())/n, "cpu-ns/item")
	b.ReportMetric(float64(t.Allocs)/n, "allocs/item")
}

// OnOff runs b.N operations of each of two variants of a workload (say,
// with a feature on and off), alternating blocks of block operations so
// that both see the same machine load, and reports the wall time and CPU
// time per operation of each (on-ns/op, off-ns/op, on-cpu-ns/op,
// off-cpu-ns/op) and cpu-ratio, on's CPU over off's. cpu reads the CPU time
// to count (nil: CPUTime, this process's); each variant gets the
// operation's index.
func OnOff(b *testing.B, block int, cpu func() time.Duration, on, off func(i int)) {
	if cpu == nil {
		cpu = CPUTime
	}
	var wall, used [2]time.Duration
	b.ResetTimer()
	for start := 0; start < b.N; start += block {
		end := min(start+block, b.N)
		for side, op := range [2]func(int){on, off} {
			t0, c0 := time.Now(), cpu()
			for i := start; i < end; i++ {
				op(i)
			}
			wall[side] += time.Since(t0)
			used[side] += cpu() - c0
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(wall[0].Nanoseconds())/n, "on-ns/op")
	b.ReportMetric(float64(wall[1].Nanoseconds())/n, "off-ns/op")
	b.ReportMetric(float64(used[0].Nanoseconds())/n, "on-cpu-ns/op")
	b.ReportMetric(float64(used[1].Nanoseconds())/n, "off-cpu-ns/op")
	if used[1] > 0 {
		b.ReportMetric(float64(used[0])/float64(used[1]), "cpu-ratio")
	}
}
