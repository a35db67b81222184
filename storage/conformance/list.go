package conformance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// listFixture writes resources whose tenancies and names are chosen to trip
// filters that compare prefixes of the wrong field ("p1" vs "p10", "ns1" vs
// "ns10") and returns them by key.
func listFixture(t *testing.T, b storage.Backend) map[string]*pbresource.Resource {
	t.Helper()
	specs := []struct {
		typ                       *pbresource.Type
		partition, namespace, nam string
	}{
		{artistV1, "p1", "ns1", "beta-1"},
		{artistV1, "p1", "ns1", "alpha-2"},
		{artistV2, "p1", "ns1", "alpha-0"},
		{artistV1, "p1", "ns1", "alpha-1"},
		{artistV1, "p1", "ns10", "alpha-1"},
		{artistV1, "p1", "ns2", "alpha-1"},
		{artistV1, "p10", "ns1", "alpha-1"},
		{artistV2, "p2", "ns1", "beta-2"},
		{artistV1, "p2", "ns1", "alpha-3"},
		{artistV1, "p2", "ns2", "gamma"},
		// Same names in other types.
		{albumV1, "p1", "ns1", "alpha-1"},
		{albumV1, "p2", "ns1", "alpha-9"},
		{otherArtistV1, "p1", "ns1", "alpha-1"},
	}
	out := make(map[string]*pbresource.Resource, len(specs))
	for _, spec := range specs {
		res := write(t, b, newResource(spec.typ, spec.partition, spec.namespace, spec.nam))
		out[key(res.Id)] = res
	}
	return out
}

func (s *suite) testList(t *testing.T) {
	b := s.newBackend(t)
	ctx := context.Background()

	// Nothing stored yet.
	got, err := b.List(ctx, storage.EventualConsistency, artist, allTenancy, "")
	require.NoError(t, err)
	require.Empty(t, got)

	stored := listFixture(t, b)
	// Delete one, to check deleted resources are not listed.
	gone := write(t, b, newResource(artistV1, "p1", "ns1", "alpha-gone"))
	require.NoError(t, b.DeleteCAS(ctx, gone.Id, gone.Version))

	const a = "demo.Artist/"
	cases := []struct {
		name              string
		typ               storage.UnversionedType
		partition, nspace string
		prefix            string
		want              []string
	}{
		{"exact tenancy", artist, "p1", "ns1", "",
			[]string{a + "p1/ns1/alpha-0", a + "p1/ns1/alpha-1", a + "p1/ns1/alpha-2", a + "p1/ns1/beta-1"}},
		{"exact tenancy and prefix", artist, "p1", "ns1", "alpha",
			[]string{a + "p1/ns1/alpha-0", a + "p1/ns1/alpha-1", a + "p1/ns1/alpha-2"}},
		{"full name as prefix", artist, "p1", "ns1", "alpha-1",
			[]string{a + "p1/ns1/alpha-1"}},
		{"prefix matching nothing", artist, "p1", "ns1", "alpha-10", nil},
		{"unknown namespace", artist, "p1", "ns3", "", nil},
		{"unknown partition", artist, "p3", storage.Wildcard, "", nil},
		{"any namespace", artist, "p1", storage.Wildcard, "",
			[]string{a + "p1/ns1/alpha-0", a + "p1/ns1/alpha-1", a + "p1/ns1/alpha-2", a + "p1/ns1/beta-1",
				a + "p1/ns10/alpha-1", a + "p1/ns2/alpha-1"}},
		{"any namespace and prefix", artist, "p1", storage.Wildcard, "alpha-1",
			[]string{a + "p1/ns1/alpha-1", a + "p1/ns10/alpha-1", a + "p1/ns2/alpha-1"}},
		{"any partition", artist, storage.Wildcard, "ns1", "",
			[]string{a + "p1/ns1/alpha-0", a + "p1/ns1/alpha-1", a + "p1/ns1/alpha-2", a + "p1/ns1/beta-1",
				a + "p10/ns1/alpha-1", a + "p2/ns1/alpha-3", a + "p2/ns1/beta-2"}},
		{"any partition and prefix", artist, storage.Wildcard, "ns1", "beta",
			[]string{a + "p1/ns1/beta-1", a + "p2/ns1/beta-2"}},
		{"everything", artist, storage.Wildcard, storage.Wildcard, "",
			[]string{a + "p1/ns1/alpha-0", a + "p1/ns1/alpha-1", a + "p1/ns1/alpha-2", a + "p1/ns1/beta-1",
				a + "p1/ns10/alpha-1", a + "p1/ns2/alpha-1", a + "p10/ns1/alpha-1",
				a + "p2/ns1/alpha-3", a + "p2/ns1/beta-2", a + "p2/ns2/gamma"}},
		{"everything with prefix", artist, storage.Wildcard, storage.Wildcard, "g",
			[]string{a + "p2/ns2/gamma"}},
		{"other kind", album, storage.Wildcard, storage.Wildcard, "",
			[]string{"demo.Album/p1/ns1/alpha-1", "demo.Album/p2/ns1/alpha-9"}},
		{"other group", storage.UnversionedTypeFrom(otherArtistV1), "p1", "ns1", "",
			[]string{"other.Artist/p1/ns1/alpha-1"}},
		{"unknown type", storage.UnversionedType{Group: "demo", Kind: "Unknown"}, storage.Wildcard, storage.Wildcard, "", nil},
	}
	for _, tc := range cases {
		got, err := b.List(ctx, storage.EventualConsistency, tc.typ,
			&pbresource.Tenancy{Partition: tc.partition, Namespace: tc.nspace}, tc.prefix)
		require.NoError(t, err, tc.name)
		var keys []string
		for _, res := range got {
			keys = append(keys, key(res.Id))
			// Each resource is listed as stored, in its own GroupVersion.
			requireProtoEqual(t, stored[key(res.Id)], res, tc.name)
		}
		require.Equal(t, tc.want, keys, tc.name)
	}

	// A List after further writes sees them, still in order.
	latest := update(t, b, stored[a+"p1/ns1/alpha-1"], "k", "v")
	write(t, b, newResource(artistV1, "p1", "ns1", "alpha-11"))
	write(t, b, newResource(artistV1, "p1", "ns1", "aaa"))
	old := stored[a+"p1/ns1/beta-1"]
	require.NoError(t, b.DeleteCAS(ctx, old.Id, old.Version))
	got, err = b.List(ctx, storage.EventualConsistency, artist,
		&pbresource.Tenancy{Partition: "p1", Namespace: "ns1"}, "")
	require.NoError(t, err)
	var keys []string
	for _, res := range got {
		keys = append(keys, key(res.Id))
	}
	require.Equal(t, []string{a + "p1/ns1/aaa", a + "p1/ns1/alpha-0", a + "p1/ns1/alpha-1",
		a + "p1/ns1/alpha-11", a + "p1/ns1/alpha-2"}, keys)
	requireProtoEqual(t, latest, got[2])
	requireProtoEqual(t, artistV2, got[1].Id.Type, "listed in its stored GroupVersion")
}
