package inmem

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/selector"
	"github.com/loomrt/loom/storage"
)

// TestListPageLabels: a page with a selective Labels hint holds every
// match, at the current version and at an earlier one, and leaves out most
// of what cannot match (each non-match has values of its own, so whether
// its signature collides with the selector's is drawn afresh).
func TestListPageLabels(t *testing.T) {
	ctx := ctxT(t)
	b := New()
	typ := storage.UnversionedTypeFrom(testType)
	var want []string
	for i := range 400 {
		r := testResource(fmt.Sprintf("r%03d", i))
		r.Metadata = map[string]string{"team": fmt.Sprint("t", i), "tier": fmt.Sprint("x", i)}
		if i%10 == 0 {
			r.Metadata["team"] = "payments"
			want = append(want, r.Id.Name)
		}
		_, err := b.WriteCAS(ctx, r)
		require.NoError(t, err)
	}
	labels := selector.MustParse("team=payments").Prefilter()
	check := func(req storage.PageRequest) {
		t.Helper()
		req.Labels = labels
		page, err := b.ListPage(ctx, typ, allTenancy, "", req)
		require.NoError(t, err)
		var got []string
		for _, r := range page.Resources {
			if r.Metadata["team"] == "payments" {
				got = append(got, r.Id.Name)
			}
		}
		require.Equal(t, want, got, "every match")
		require.Less(t, len(page.Resources), 2*len(want), "most non-matches left out")
	}
	check(storage.PageRequest{})
	first, err := b.ListPage(ctx, typ, allTenancy, "", storage.PageRequest{Limit: 1})
	require.NoError(t, err)
	_, err = b.WriteCAS(ctx, testResource("r999"))
	require.NoError(t, err)
	check(storage.PageRequest{Version: first.Version})
}
