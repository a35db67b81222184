package selector_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomrt/loom/selector"
)

// TestPrefilterNeverRulesOutAMatch: over random metadata and selectors, a
// resource that matches always passes the prefilter, and the prefilter of
// a selective selector rules out most of what does not match.
func TestPrefilterNeverRulesOutAMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(n int) string { return fmt.Sprint(rng.IntN(n)) }
	ops := []string{"k%s=v%s", "k%s!=v%s", "k%s in (v%s,v1)", "k%s notin (v%s)", "k%s", "!k%s"}
	var nonMatches, ruledOut int
	for range 20000 {
		md := map[string]string{}
		for range rng.IntN(6) {
			md["k"+pick(8)] = "v" + pick(8)
		}
		var raw string
		for i := range 1 + rng.IntN(3) {
			if i > 0 {
				raw += ","
			}
			op := ops[rng.IntN(len(ops))]
			if strings.Count(op, "%s") == 1 {
				raw += fmt.Sprintf(op, pick(8))
			} else {
				raw += fmt.Sprintf(op, pick(8), pick(8))
			}
		}
		s, err := selector.Parse(raw)
		if err != nil {
			t.Fatalf("Parse(%q): %v", raw, err)
		}
		p := s.Prefilter()
		may := p.MayMatch(selector.SignatureOf(md))
		if s.Matches(md) {
			if !may {
				t.Fatalf("%q matches %v, but the prefilter rules it out", raw, md)
			}
			continue
		}
		if p.Selective() {
			nonMatches++
			if !may {
				ruledOut++
			}
		}
	}
	if ruledOut < nonMatches*3/4 {
		t.Errorf("the prefilter ruled out %d of %d non-matches; want most", ruledOut, nonMatches)
	}
}

func TestPrefilterSelective(t *testing.T) {
	for raw, want := range map[string]bool{
		"":                 false,
		"a!=b,c notin (d)": false,
		"!a":               false,
		"a":                true,
		"a=b":              true,
		"a in (x,y)":       true,
	} {
		if got := selector.MustParse(raw).Prefilter().Selective(); got != want {
			t.Errorf("MustParse(%q).Prefilter().Selective() = %v, want %v", raw, got, want)
		}
	}
}
