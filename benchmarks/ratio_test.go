package benchmarks

import (
	"slices"
	"sync"
	"testing"
)

// loomFigures keeps, per workload and metric, what the impl=loom
// sub-benchmarks measured in this process, so the peers' sub-benchmarks can
// report their ratio to it. go test runs every count of one sub-benchmark
// before the next sub-benchmark, so Loom's runs are all in by then.
var loomFigures = struct {
	sync.Mutex
	m map[string][]float64
}{m: map[string][]float64{}}

// recordLoom remembers one Loom figure of workload (e.g. "W3/workers=4").
func recordLoom(workload, metric string, v float64) {
	loomFigures.Lock()
	defer loomFigures.Unlock()
	k := workload + " " + metric
	loomFigures.m[k] = append(loomFigures.m[k], v)
}

// reportRatio reports peer divided by the median Loom figure of the same
// workload and metric as "ratio", when Loom ran in this process. For costs
// (ns, µs, bytes) that is how many times cheaper Loom is; above 1 is better
// for Loom.
func reportRatio(b *testing.B, workload, metric string, peer float64) {
	loomFigures.Lock()
	vs := slices.Clone(loomFigures.m[workload+" "+metric])
	loomFigures.Unlock()
	if len(vs) == 0 {
		return
	}
	slices.Sort(vs)
	med := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		med = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	if med > 0 {
		b.ReportMetric(peer/med, "ratio")
	}
}
