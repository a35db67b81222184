package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/internal/testkit/benchutil"
)

// BenchmarkListSelector measures what a server spends on a List with a
// label selector (issue 24): the server's List over the in-memory backend,
// then the encoding of the response, as gRPC does it. "selector" lists
// 10,000 Bars of which 1,000 (10%) match team=payments; "matches-only"
// lists a store of just those 1,000 with no selector, in the same rounds.
// The budget is a ratio of at most 1.2.
func BenchmarkListSelector(b *testing.B) {
	const n, every = 10000, 10
	setup := func(b *testing.B, all bool) *testEnv {
		env := newEnv(b)
		for i := range n {
			if !all && i%every != 0 {
				continue
			}
			r := bar(b, fmt.Sprintf("bar-%05d", i), "x")
			r.Metadata = map[string]string{"team": "ops", "tier": "web"}
			if i%every == 0 {
				r.Metadata["team"] = "payments"
			}
			env.write(b, r)
		}
		return env
	}
	ctx := testCtx(b)
	list := func(b *testing.B, env *testEnv, selector string) {
		req := barList(0, "")
		req.LabelSelector = selector
		rsp, err := env.server.List(ctx, req)
		require.NoError(b, err)
		if len(rsp.Resources) != n/every {
			b.Fatalf("listed %d, want %d", len(rsp.Resources), n/every)
		}
		if _, err := proto.Marshal(rsp); err != nil {
			b.Fatal(err)
		}
	}
	all, matches := setup(b, true), setup(b, false)
	// One after the other in each round, so that the machine's load
	// weighs on both alike.
	// The process's CPU time (user and system, every thread, the garbage
	// collector's included), not the wall clock, which other work on the
	// machine stretches.
	var sel, only time.Duration
	for b.Loop() {
		start := benchutil.CPUTime()
		list(b, all, "team=payments")
		mid := benchutil.CPUTime()
		list(b, matches, "")
		sel, only = sel+mid-start, only+benchutil.CPUTime()-mid
	}
	b.ReportMetric(float64(sel.Microseconds())/float64(b.N), "selector-cpu-µs/list")
	b.ReportMetric(float64(only.Microseconds())/float64(b.N), "matches-only-cpu-µs/list")
	b.ReportMetric(float64(sel)/float64(only), "ratio")
}
