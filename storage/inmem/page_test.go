package inmem

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSmallestOwned: smallestOwned returns the m smallest candidates in
// key order, for every m, whatever the input order.
func TestSmallestOwned(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	for n := range 40 {
		var all []ownedCand
		for i := range n {
			all = append(all, ownedCand{key: pkey{key: rkey{name: fmt.Sprintf("n%03d", i)}}})
		}
		for m := 1; m <= n+1; m++ {
			cs := slices.Clone(all)
			rnd.Shuffle(len(cs), func(i, j int) { cs[i], cs[j] = cs[j], cs[i] })
			got := smallestOwned(cs, m)
			require.Equal(t, all[:min(m, n)], got, "n %d m %d", n, m)
		}
	}
}
