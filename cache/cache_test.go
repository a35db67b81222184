package cache_test

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/anypb"
)

var (
	artistType = &pbresource.Type{Group: "music", GroupVersion: "v1", Kind: "Artist"}
	albumType  = &pbresource.Type{Group: "music", GroupVersion: "v1", Kind: "Album"}
)

func id(typ *pbresource.Type, name string) *pbresource.ID {
	return &pbresource.ID{Type: typ, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name, Uid: "uid-" + name}
}

func res(typ *pbresource.Type, name, version string, owner *pbresource.ID, meta map[string]string) *pbresource.Resource {
	return &pbresource.Resource{Id: id(typ, name), Version: version, Owner: owner, Metadata: meta}
}

// genreIndex indexes albums by the space-free "genre" metadata (multi-valued:
// a comma separates several).
var genreIndex = cache.NewMultiIndex("genre", func(r *pbresource.Resource) ([]string, error) {
	g, ok := r.Metadata["genre"]
	if !ok {
		return nil, nil
	}
	var out []string
	start := 0
	for i := 0; i <= len(g); i++ {
		if i == len(g) || g[i] == ',' {
			out = append(out, g[start:i])
			start = i + 1
		}
	}
	return out, nil
})

var labelIndex = cache.NewIndex("label", func(r *pbresource.Resource) (string, bool, error) {
	l, ok := r.Metadata["label"]
	return l, ok, nil
})

func newCache(t *testing.T) *cache.Cache {
	c := cache.New()
	require.NoError(t, c.AddType(artistType))
	require.NoError(t, c.AddType(albumType, genreIndex, labelIndex))
	return c
}

func names(rs []*pbresource.Resource) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Id.Name
	}
	return out
}

func TestIndexes(t *testing.T) {
	c := newCache(t)
	owner := id(artistType, "bowie")
	_, err := c.Upsert(res(artistType, "bowie", "1", nil, nil))
	require.NoError(t, err)
	_, err = c.Upsert(res(albumType, "low", "2", owner, map[string]string{"genre": "rock,ambient", "label": "rca"}))
	require.NoError(t, err)
	_, err = c.Upsert(res(albumType, "heroes", "3", owner, map[string]string{"genre": "rock"}))
	require.NoError(t, err)

	got, err := c.GetByID(id(albumType, "low"))
	require.NoError(t, err)
	assert.Equal(t, "2", got.Version)
	got, err = c.Get(albumType, cache.IDIndex, cache.Key(id(albumType, "heroes")))
	require.NoError(t, err)
	assert.Equal(t, "heroes", got.Id.Name)

	children, err := c.List(albumType, cache.OwnerIndex, cache.OwnerKey(owner))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"low", "heroes"}, names(children))

	rock, err := c.List(albumType, "genre", "rock")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"low", "heroes"}, names(rock))
	rockIDs, err := c.ListIDs(albumType, "genre", "rock")
	require.NoError(t, err)
	require.Len(t, rockIDs, 2)
	rockIDs[0].Tenancy.Namespace = "mutated" // the caller's own copy
	again, _ := c.ListIDs(albumType, "genre", "rock")
	assert.Equal(t, "default", again[0].Tenancy.Namespace)
	ambient, err := c.List(albumType, "genre", "ambient")
	require.NoError(t, err)
	assert.Equal(t, []string{"low"}, names(ambient))

	byLabel, err := c.Get(albumType, "label", "rca")
	require.NoError(t, err)
	assert.Equal(t, "low", byLabel.Id.Name)
	_, err = c.Get(albumType, "genre", "rock")
	assert.ErrorContains(t, err, "use List", "Get on a key with several resources is an error")

	// An update moves the resource between buckets.
	_, err = c.Upsert(res(albumType, "low", "4", owner, map[string]string{"genre": "ambient"}))
	require.NoError(t, err)
	rock, _ = c.List(albumType, "genre", "rock")
	assert.Equal(t, []string{"heroes"}, names(rock))
	none, _ := c.Get(albumType, "label", "rca")
	assert.Nil(t, none)

	old, err := c.Delete(id(albumType, "heroes"))
	require.NoError(t, err)
	assert.Equal(t, "3", old.Version)
	rock, _ = c.List(albumType, "genre", "rock")
	assert.Empty(t, rock)
	assert.Equal(t, 1, c.Len(albumType))

	_, err = c.List(albumType, "nope", "x")
	assert.ErrorContains(t, err, `no index "nope"`)
	_, err = c.List(&pbresource.Type{Group: "x", GroupVersion: "v1", Kind: "Y"}, cache.IDIndex, "")
	assert.ErrorContains(t, err, "does not hold type x.v1.Y")
}

// TestOwnerIndexKeysByUid recreates an owner under the same name while a
// resource the first one owned is still cached (not yet reaped): each
// lifetime of the owner finds only its own resources.
func TestOwnerIndexKeysByUid(t *testing.T) {
	c := newCache(t)
	first := id(artistType, "prince")
	first.Uid = "uid1"
	_, err := c.Upsert(&pbresource.Resource{Id: first, Version: "1"})
	require.NoError(t, err)
	_, err = c.Upsert(res(albumType, "c1", "2", first, nil))
	require.NoError(t, err)

	removed, err := c.Delete(first)
	require.NoError(t, err)
	require.NotNil(t, removed)
	second := id(artistType, "prince")
	second.Uid = "uid2"
	_, err = c.Upsert(&pbresource.Resource{Id: second, Version: "3"})
	require.NoError(t, err)
	_, err = c.Upsert(res(albumType, "c2", "4", second, nil))
	require.NoError(t, err)

	now, err := c.List(albumType, cache.OwnerIndex, cache.OwnerKey(second))
	require.NoError(t, err)
	assert.Equal(t, []string{"c2"}, names(now), "the new owner does not inherit the old one's children")
	ids, err := c.ListIDs(albumType, cache.OwnerIndex, cache.OwnerKey(second))
	require.NoError(t, err)
	require.Len(t, ids, 1)
	assert.Equal(t, "c2", ids[0].Name)
	before, err := c.List(albumType, cache.OwnerIndex, cache.OwnerKey(first))
	require.NoError(t, err)
	assert.Equal(t, []string{"c1"}, names(before), "the earlier owner's children are still found by its Uid")

	// Lookups that could only ever find nothing are errors, not empty
	// results: a key by name, and an owner ID without its Uid.
	_, err = c.List(albumType, cache.OwnerIndex, cache.Key(second))
	assert.ErrorContains(t, err, "cache.OwnerKey")
	_, err = c.ListIDs(albumType, cache.OwnerIndex, cache.OwnerKey(&pbresource.ID{Type: artistType, Name: "prince"}))
	assert.ErrorContains(t, err, "Uid")
}

func TestCloneOnRead(t *testing.T) {
	c := newCache(t)
	data, _ := anypb.New(&pbresource.Tombstone{})
	r := res(albumType, "low", "1", nil, map[string]string{"genre": "rock"})
	r.Data = data
	_, err := c.Upsert(r)
	require.NoError(t, err)

	got, _ := c.GetByID(id(albumType, "low"))
	got.Metadata["genre"] = "jazz"
	got.Id.Name = "mutated"
	got.Id.Tenancy.Namespace = "mutated"
	got.Data.Value = []byte("garbage")
	list, _ := c.List(albumType, "genre", "rock")
	require.Len(t, list, 1)
	list[0].Version = "99"

	again, _ := c.GetByID(id(albumType, "low"))
	require.NotNil(t, again)
	assert.Equal(t, "rock", again.Metadata["genre"])
	assert.Equal(t, "1", again.Version)
	assert.Equal(t, "default", again.Id.Tenancy.Namespace)
	assert.Empty(t, again.Data.Value)
}

func TestGetByIDChecksUid(t *testing.T) {
	c := newCache(t)
	_, _ = c.Upsert(res(artistType, "bowie", "1", nil, nil))
	other := id(artistType, "bowie")
	other.Uid = "someone-else"
	got, err := c.GetByID(other)
	require.NoError(t, err)
	assert.Nil(t, got)
}

func TestParents(t *testing.T) {
	c := cache.New()
	byScope := cache.NewIndex("scope", func(r *pbresource.Resource) (string, bool, error) {
		s, ok := r.Metadata["scope"]
		return s, ok, nil
	})
	require.NoError(t, c.AddType(artistType, byScope))
	for name, scope := range map[string]string{"p": "default/", "n": "default/web", "other": "team/web", "exact": "default/web/x"} {
		_, err := c.Upsert(res(artistType, name, "1", nil, map[string]string{"scope": scope}))
		require.NoError(t, err)
	}
	got, err := c.Parents(artistType, "scope", "default/web/x")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"p", "n", "exact"}, names(got))
}

func TestIndexErrorsLeaveTheResourceOutOfThatIndex(t *testing.T) {
	c := cache.New()
	var reported []string
	c.OnIndexError(func(index string, r *pbresource.Resource, err error) {
		reported = append(reported, index+":"+r.Id.Name+":"+err.Error())
	})
	failing := cache.NewIndex("fails", func(r *pbresource.Resource) (string, bool, error) {
		if r.Metadata["bad"] == "yes" {
			return "", false, fmt.Errorf("boom")
		}
		return "k", true, nil
	})
	require.NoError(t, c.AddType(artistType, failing))
	_, err := c.Upsert(res(artistType, "a", "1", nil, nil))
	require.NoError(t, err)
	_, err = c.Upsert(res(artistType, "a", "2", nil, map[string]string{"bad": "yes"}))
	require.NoError(t, err, "one bad resource must not stop the type from being cached")
	got, _ := c.GetByID(id(artistType, "a"))
	assert.Equal(t, "2", got.Version)
	list, _ := c.List(artistType, "fails", "k")
	assert.Empty(t, list)
	assert.Equal(t, []string{"fails:a:boom"}, reported)
}

func TestDecodedIndexSkipsOtherMessages(t *testing.T) {
	c := cache.New()
	byPartition := cache.NewDecodedIndex("partition", func(_ *pbresource.Resource, ten *pbresource.Tenancy) (string, bool, error) {
		return ten.Partition, true, nil
	})
	var reported int
	c.OnIndexError(func(string, *pbresource.Resource, error) { reported++ })
	require.NoError(t, c.AddType(artistType, byPartition))
	tenancyData, _ := anypb.New(&pbresource.Tenancy{Partition: "p1"})
	otherData, _ := anypb.New(&pbresource.Tombstone{})
	r1 := res(artistType, "one", "1", nil, nil)
	r1.Data = tenancyData
	r2 := res(artistType, "two", "2", nil, nil)
	r2.Data = otherData
	_, _ = c.Upsert(r1)
	_, _ = c.Upsert(r2)
	got, err := c.List(artistType, "partition", "p1")
	require.NoError(t, err)
	assert.Equal(t, []string{"one"}, names(got))
	assert.Zero(t, reported, "another message type is not an error, just not indexed")
}

func TestAddTypeRules(t *testing.T) {
	c := newCache(t)
	require.NoError(t, c.AddType(albumType, genreIndex), "the same index again is fine")
	other := cache.NewIndex("genre", func(*pbresource.Resource) (string, bool, error) { return "", false, nil })
	assert.ErrorContains(t, c.AddType(albumType, other), "already defined")
	assert.ErrorContains(t, c.AddType(artistType, cache.NewIndex("owner", nil)), "owner")
	assert.ErrorContains(t, c.AddType(artistType, labelIndex, labelIndex), "twice")

	// An index added later covers what is already cached.
	_, _ = c.Upsert(res(artistType, "bowie", "1", nil, map[string]string{"label": "rca"}))
	require.NoError(t, c.AddType(artistType, labelIndex))
	got, _ := c.Get(artistType, "label", "rca")
	require.NotNil(t, got)
}

func TestReplace(t *testing.T) {
	c := newCache(t)
	_, _ = c.Upsert(res(artistType, "keep", "1", nil, nil))
	_, _ = c.Upsert(res(artistType, "change", "1", nil, nil))
	_, _ = c.Upsert(res(artistType, "gone", "1", nil, nil))

	events, err := c.Replace(artistType, []*pbresource.Resource{
		res(artistType, "keep", "1", nil, nil),
		res(artistType, "change", "2", nil, nil),
		res(artistType, "new", "3", nil, nil),
	})
	require.NoError(t, err)
	got := map[string]cache.EventKind{}
	oldVersions := map[string]string{}
	for _, e := range events {
		got[e.Resource.Id.Name] = e.Kind
		oldVersions[e.Resource.Id.Name] = e.Old.GetVersion()
	}
	assert.Equal(t, map[string]cache.EventKind{"change": cache.Upserted, "new": cache.Upserted, "gone": cache.Deleted}, got)
	// Old is the copy the cache held before: none for a new resource, the
	// removed one for a deletion.
	assert.Equal(t, map[string]string{"change": "1", "new": "", "gone": "1"}, oldVersions)
	assert.Equal(t, 3, c.Len(artistType))
}

// TestRandomizedIndexConsistency applies random upserts and deletes and
// checks every index against a brute-force model after each step.
func TestRandomizedIndexConsistency(t *testing.T) {
	seed := int64(7)
	rng := rand.New(rand.NewSource(seed))
	c := newCache(t)
	model := map[string]map[string]string{}
	genres := []string{"rock", "jazz", "pop", "rock,jazz", "pop,rock,jazz"}
	for step := 0; step < 3000; step++ {
		name := fmt.Sprintf("a%d", rng.Intn(60))
		if rng.Intn(4) == 0 {
			_, err := c.Delete(id(albumType, name))
			require.NoError(t, err)
			delete(model, name)
		} else {
			meta := map[string]string{"genre": genres[rng.Intn(len(genres))]}
			_, err := c.Upsert(res(albumType, name, fmt.Sprint(step), nil, meta))
			require.NoError(t, err)
			model[name] = meta
		}
		if step%100 != 0 {
			continue
		}
		for _, g := range []string{"rock", "jazz", "pop"} {
			var want []string
			for n, m := range model {
				for _, part := range splitComma(m["genre"]) {
					if part == g {
						want = append(want, n)
					}
				}
			}
			got, err := c.List(albumType, "genre", g)
			require.NoError(t, err)
			require.ElementsMatch(t, want, names(got), "seed %d step %d genre %s", seed, step, g)
		}
	}
	assert.Equal(t, len(model), c.Len(albumType))
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

func TestQueries(t *testing.T) {
	c := newCache(t)
	_, _ = c.Upsert(res(albumType, "low", "1", nil, map[string]string{"genre": "rock"}))
	require.NoError(t, c.AddQuery("rock-albums", cache.QueryFunc(func(rc cache.ReadOnlyCache, args ...any) (cache.ResourceIterator, error) {
		return rc.ListIterator(albumType, "genre", "rock")
	})))
	assert.Error(t, c.AddQuery("rock-albums", cache.IndexQuery(albumType, "genre")))
	require.NoError(t, c.AddQuery("by-genre", cache.IndexQuery(albumType, "genre")))
	it, err := c.Query("by-genre", "rock")
	require.NoError(t, err)
	require.NotNil(t, it.Next())
	_, err = c.Query("by-genre", 42)
	assert.ErrorContains(t, err, "string key")
	it, err = c.Query("rock-albums")
	require.NoError(t, err)
	first := it.Next()
	require.NotNil(t, first)
	assert.Equal(t, "low", first.Id.Name)
	assert.Nil(t, it.Next())
	_, err = c.Query("missing")
	assert.ErrorContains(t, err, `no query named "missing"`)
}

func TestReadOnlyLookups(t *testing.T) {
	c := newCache(t)
	owner := id(artistType, "bowie")
	_, err := c.Upsert(res(albumType, "low", "1", owner, map[string]string{"genre": "rock,ambient", "label": "rca"}))
	require.NoError(t, err)
	_, err = c.Upsert(res(albumType, "heroes", "2", owner, map[string]string{"genre": "rock"}))
	require.NoError(t, err)

	// The same resources List finds, but the stored ones: two lookups hand
	// out the same pointers, and nothing is copied.
	shared, err := c.ListReadOnly(albumType, cache.OwnerIndex, cache.OwnerKey(owner))
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"low", "heroes"}, names(shared))
	again, err := c.ListReadOnly(albumType, cache.OwnerIndex, cache.OwnerKey(owner))
	require.NoError(t, err)
	assert.ElementsMatch(t, shared, again)
	assert.Same(t, shared[0], again[indexOf(again, shared[0])])

	rock, err := c.ListReadOnly(albumType, "genre", "rock")
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"low", "heroes"}, names(rock))
	byID, err := c.ListReadOnly(albumType, cache.IDIndex, cache.Key(id(albumType, "low")))
	require.NoError(t, err)
	assert.Equal(t, []string{"low"}, names(byID))
	none, err := c.ListReadOnly(albumType, "genre", "jazz")
	require.NoError(t, err)
	assert.Empty(t, none)

	ids, err := c.ListIDsReadOnly(albumType, "genre", "rock")
	require.NoError(t, err)
	require.Len(t, ids, 2)
	for _, i := range ids {
		assert.Same(t, rock[indexOfName(rock, i.Name)].Id, i, "the stored ID, not a copy")
	}
	ids, err = c.ListIDsReadOnly(albumType, cache.IDIndex, cache.Key(id(albumType, "heroes")))
	require.NoError(t, err)
	require.Len(t, ids, 1)
	assert.Equal(t, "heroes", ids[0].Name)

	// An update stores a new resource: what was handed out stays as it was.
	_, err = c.Upsert(res(albumType, "low", "3", owner, map[string]string{"genre": "pop"}))
	require.NoError(t, err)
	assert.Equal(t, "1", byID[0].Version)
	rock, err = c.ListReadOnly(albumType, "genre", "rock")
	require.NoError(t, err)
	assert.Equal(t, []string{"heroes"}, names(rock))

	// The same errors as the copying lookups.
	_, err = c.ListReadOnly(albumType, cache.OwnerIndex, cache.Key(owner))
	assert.ErrorContains(t, err, "cache.OwnerKey")
	_, err = c.ListIDsReadOnly(albumType, cache.OwnerIndex, "")
	assert.ErrorContains(t, err, "Uid")
	_, err = c.ListReadOnly(albumType, "nope", "x")
	assert.Error(t, err)
	_, err = c.ListIDsReadOnly(artistType, "genre", "rock")
	assert.Error(t, err)
	_, err = c.ListIDsReadOnly(albumType, cache.IDIndex, "not-a-key")
	assert.Error(t, err)
}

// TestReadOnlyLookupsConcurrent reads what the read-only lookups hand out
// while the same resources are replaced and deleted: under -race this checks
// that the cache never changes a resource it has stored.
func TestReadOnlyLookupsConcurrent(t *testing.T) {
	c := newCache(t)
	owner := id(artistType, "bowie")
	for i := range 20 {
		_, err := c.Upsert(res(albumType, fmt.Sprint("a", i), "1", owner, map[string]string{"genre": "rock"}))
		require.NoError(t, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := range 200 {
			for i := range 20 {
				name := fmt.Sprint("a", i)
				if v%7 == 0 {
					_, _ = c.Delete(id(albumType, name))
				}
				_, _ = c.Upsert(res(albumType, name, fmt.Sprint(v+2), owner, map[string]string{"genre": "rock"}))
			}
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		rs, err := c.ListReadOnly(albumType, "genre", "rock")
		require.NoError(t, err)
		for _, r := range rs {
			_ = r.Id.Name + r.Id.Tenancy.Namespace + r.Version + r.Metadata["genre"] + r.Owner.Uid
		}
		ids, err := c.ListIDsReadOnly(albumType, cache.OwnerIndex, cache.OwnerKey(owner))
		require.NoError(t, err)
		for _, i := range ids {
			_ = i.Name + i.Uid + i.Type.Kind + i.Tenancy.Partition
		}
	}
}

func indexOf(rs []*pbresource.Resource, r *pbresource.Resource) int {
	for i, x := range rs {
		if x == r {
			return i
		}
	}
	return -1
}

func indexOfName(rs []*pbresource.Resource, name string) int {
	for i, x := range rs {
		if x.Id.Name == name {
			return i
		}
	}
	return -1
}

// TestSameNameInTenancies: entries are found by tenancy and name, so the
// same name in two namespaces names two resources.
func TestSameNameInTenancies(t *testing.T) {
	c := newCache(t)
	in := func(ns string) *pbresource.ID {
		i := id(albumType, "low")
		i.Tenancy.Namespace = ns
		i.Uid = "uid-" + ns
		return i
	}
	for _, ns := range []string{"a", "b"} {
		_, err := c.Upsert(&pbresource.Resource{Id: in(ns), Version: ns})
		require.NoError(t, err)
	}
	assert.Equal(t, 2, c.Len(albumType))
	got, err := c.GetByID(in("b"))
	require.NoError(t, err)
	assert.Equal(t, "b", got.Version)
	removed, err := c.Delete(in("a"))
	require.NoError(t, err)
	assert.Equal(t, "a", removed.Version)
	assert.Equal(t, 1, c.Len(albumType))
	got, err = c.GetByID(in("a"))
	require.NoError(t, err)
	assert.Nil(t, got)
	ids, err := c.IDs(albumType)
	require.NoError(t, err)
	require.Len(t, ids, 1)
	assert.Equal(t, "b", ids[0].Tenancy.Namespace)

	events, err := c.Replace(albumType, []*pbresource.Resource{{Id: in("a"), Version: "a2"}})
	require.NoError(t, err)
	require.Len(t, events, 2)
	assert.Equal(t, 1, c.Len(albumType))
	got, err = c.GetByID(in("a"))
	require.NoError(t, err)
	assert.Equal(t, "a2", got.Version)
}

// TestSharedTypeMessages: reads find the right type whether the ID's Type
// is a stored resource's own message (shared by several resources, as
// storage/inmem stores them) or another one, across types written in turn.
func TestSharedTypeMessages(t *testing.T) {
	c := newCache(t)
	artist := &pbresource.Type{Group: artistType.Group, GroupVersion: artistType.GroupVersion, Kind: artistType.Kind}
	album := &pbresource.Type{Group: albumType.Group, GroupVersion: albumType.GroupVersion, Kind: albumType.Kind}
	for i, name := range []string{"a", "b", "c"} {
		_, err := c.Upsert(res(artist, name, fmt.Sprint(i), nil, nil))
		require.NoError(t, err)
		_, err = c.Upsert(res(album, name, fmt.Sprint(i), nil, nil))
		require.NoError(t, err)
	}
	for _, typ := range []*pbresource.Type{artist, album, artistType, albumType} {
		for _, name := range []string{"a", "b", "c"} {
			got, err := c.GetByID(id(typ, name))
			require.NoError(t, err)
			require.NotNil(t, got, "%s %s", typ.Kind, name)
			require.Equal(t, typ.Kind, got.Id.Type.Kind)
		}
	}
	_, err := c.GetByID(id(&pbresource.Type{Group: "music", GroupVersion: "v1", Kind: "Song"}, "a"))
	require.Error(t, err)
}
