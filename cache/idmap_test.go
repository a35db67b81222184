package cache

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// TestIDMapCollisions runs random swaps and removes against a plain map,
// with a hash that sends many names to one value, so that the overflow map
// (which real 64-bit hashes practically never use) is exercised: entries
// sharing a hash, the first of them removed, and names reinserted.
func TestIDMapCollisions(t *testing.T) {
	for _, buckets := range []uint64{1, 3, 0} { // 0: the real hash
		t.Run(fmt.Sprint(buckets), func(t *testing.T) {
			m := newIDMap()
			if buckets > 0 {
				m.testHash = func(name string) uint64 { return uint64(len(name)) % buckets }
			}
			want := map[resource.NameKey]*entry{}
			rnd := rand.New(rand.NewPCG(1, buckets))
			tenancies := []string{"a", "b"}
			for i := range 3000 {
				k := resource.NameKey{Partition: "p", Namespace: tenancies[rnd.IntN(2)], Name: strings.Repeat("x", 1+rnd.IntN(3)) + fmt.Sprint(rnd.IntN(10))}
				if rnd.IntN(3) == 0 {
					got, ok := m.remove(k)
					if prev, had := want[k]; had != ok || got != prev {
						t.Fatalf("step %d: remove(%v) = %p, %v; want %p, %v", i, k, got, ok, prev, had)
					}
					delete(want, k)
				} else {
					e := &entry{res: &pbresource.Resource{Id: &pbresource.ID{Name: k.Name}}}
					if prev := m.swap(k, e); prev != want[k] {
						t.Fatalf("step %d: swap(%v) replaced %p, want %p", i, k, prev, want[k])
					}
					want[k] = e
				}
				if m.len() != len(want) {
					t.Fatalf("step %d: len %d, want %d", i, m.len(), len(want))
				}
				for wk, we := range want {
					if got, ok := m.get(wk); !ok || got != we {
						t.Fatalf("step %d: get(%v) = %p, %v; want %p", i, wk, got, ok, we)
					}
				}
				seen := 0
				m.each(func(k resource.NameKey, e *entry) bool {
					seen++
					if want[k] != e {
						t.Fatalf("step %d: each gave %v → %p, want %p", i, k, e, want[k])
					}
					return true
				})
				if seen != len(want) {
					t.Fatalf("step %d: each visited %d entries, want %d", i, seen, len(want))
				}
			}
		})
	}
}
