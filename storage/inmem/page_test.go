package inmem

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/proto/pbresource"
)

// TestSmallestOwned: smallestOwned returns the m smallest resources of the
// set that follow a key, in key order, for every m and starting key.
func TestSmallestOwned(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	typ := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "k"}
	for n := range 30 {
		set := make(map[*entry]struct{})
		var names []string
		for _, i := range rnd.Perm(n) {
			name := fmt.Sprintf("n%03d", i)
			set[&entry{res: &pbresource.Resource{Id: &pbresource.ID{Type: typ, Tenancy: &pbresource.Tenancy{}, Name: name}}}] = struct{}{}
			names = append(names, name)
		}
		for from := range n + 1 {
			// Names n000 ... follow "n" + from-1, i.e. from on.
			follows := func(k pkey) bool { return from == 0 || k.key.Name > fmt.Sprintf("n%03d", from-1) }
			for m := 1; m <= n+1; m++ {
				var got []string
				for _, c := range smallestOwned(set, follows, m) {
					got = append(got, c.res.Id.Name)
				}
				var want []string
				for i := from; i < n && len(want) < m; i++ {
					want = append(want, fmt.Sprintf("n%03d", i))
				}
				require.Equal(t, want, got, "n %d from %d m %d", n, from, m)
			}
		}
	}
}
