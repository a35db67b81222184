package benchmarks

import (
	"slices"
	"sync"
	"testing"
)

// loomFigures keeps, per workload and metric, what the impl=loom
// sub-benchmarks measured in this process, so the peers' sub-benchmarks can
// report their ratio to it. go test runs every count of one sub-benchmark
// before the next sub-benchmark, so Loom's runs are all in by then. Each
// count has its own *testing.B, whose function is called with growing b.N
// until the run is long enough; only its last call is reported, so only
// its last figure is kept.
var loomFigures = struct {
	sync.Mutex
	m map[string]map[*testing.B]float64
}{m: map[string]map[*testing.B]float64{}}

// recordLoom remembers the Loom figure of workload (e.g. "W3/workers=4")
// measured by b.
func recordLoom(b *testing.B, workload, metric string, v float64) {
	loomFigures.Lock()
	defer loomFigures.Unlock()
	k := workload + " " + metric
	if loomFigures.m[k] == nil {
		loomFigures.m[k] = map[*testing.B]float64{}
	}
	loomFigures.m[k][b] = v
}

// reportRatio reports peer divided by the median Loom figure of the same
// workload and metric as "ratio", when Loom ran in this process. For costs
// (ns, µs, bytes) that is how many times cheaper Loom is; above 1 is better
// for Loom.
func reportRatio(b *testing.B, workload, metric string, peer float64) {
	loomFigures.Lock()
	var vs []float64
	for _, v := range loomFigures.m[workload+" "+metric] {
		vs = append(vs, v)
	}
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
