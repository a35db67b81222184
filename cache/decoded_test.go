package cache_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// withData returns r with a Tenancy message as its Data (the payload
// message of these tests).
func withData(t testing.TB, r *pbresource.Resource, payload string) *pbresource.Resource {
	data, err := anypb.New(&pbresource.Tenancy{Partition: payload})
	require.NoError(t, err)
	r.Data = data
	return r
}

// wrapped is a ReadOnlyCache that is not a *cache.Cache, as a test double
// would be: typed reads fall back to its methods.
type wrapped struct{ cache.ReadOnlyCache }

func TestDecodedReads(t *testing.T) {
	for name, c := range map[string]func(*cache.Cache) cache.ReadOnlyCache{
		"cache":   func(c *cache.Cache) cache.ReadOnlyCache { return c },
		"wrapped": func(c *cache.Cache) cache.ReadOnlyCache { return wrapped{c} },
	} {
		t.Run(name, func(t *testing.T) { testDecodedReads(t, c) })
	}
}

func testDecodedReads(t *testing.T, view func(*cache.Cache) cache.ReadOnlyCache) {
	cc := newCache(t)
	c := view(cc)
	owner := id(artistType, "bowie")
	_, err := cc.Upsert(withData(t, res(albumType, "low", "1", owner, map[string]string{"label": "rca"}), "low-data"))
	require.NoError(t, err)
	_, err = cc.Upsert(withData(t, res(albumType, "heroes", "2", owner, nil), "heroes-data"))
	require.NoError(t, err)

	d, err := cache.GetDecodedByID[*pbresource.Tenancy](c, id(albumType, "low"))
	require.NoError(t, err)
	require.NotNil(t, d)
	assert.Equal(t, "low-data", d.Data.Partition)
	assert.Equal(t, "1", d.Resource.Version)

	// The copy is the caller's: changing it changes nothing in the cache.
	d.Data.Partition = "changed"
	d.Resource.Version = "changed"
	again, err := cache.GetDecodedByID[*pbresource.Tenancy](c, id(albumType, "low"))
	require.NoError(t, err)
	assert.Equal(t, "low-data", again.Data.Partition)
	assert.Equal(t, "1", again.Resource.Version)
	ro, err := cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, id(albumType, "low"))
	require.NoError(t, err)
	assert.Equal(t, "low-data", ro.Data.Partition)

	byLabel, err := cache.GetDecoded[*pbresource.Tenancy](c, albumType, "label", "rca")
	require.NoError(t, err)
	assert.Equal(t, "low", byLabel.Resource.Id.Name)
	assert.Equal(t, "low-data", byLabel.Data.Partition)
	roByLabel, err := cache.GetDecodedReadOnly[*pbresource.Tenancy](c, albumType, "label", "rca")
	require.NoError(t, err)
	assert.Equal(t, "low-data", roByLabel.Data.Partition)

	for _, list := range []func() ([]*resource.Decoded[*pbresource.Tenancy], error){
		func() ([]*resource.Decoded[*pbresource.Tenancy], error) {
			return cache.ListDecoded[*pbresource.Tenancy](c, albumType, cache.OwnerIndex, cache.OwnerKey(owner))
		},
		func() ([]*resource.Decoded[*pbresource.Tenancy], error) {
			return cache.ListDecodedReadOnly[*pbresource.Tenancy](c, albumType, cache.OwnerIndex, cache.OwnerKey(owner))
		},
	} {
		got, err := list()
		require.NoError(t, err)
		data := map[string]string{}
		for _, d := range got {
			data[d.Resource.Id.Name] = d.Data.Partition
		}
		assert.Equal(t, map[string]string{"low": "low-data", "heroes": "heroes-data"}, data)
	}

	// Nothing found: nil without an error.
	none, err := cache.GetDecodedByID[*pbresource.Tenancy](c, id(albumType, "missing"))
	require.NoError(t, err)
	assert.Nil(t, none)
	otherUid := id(albumType, "low")
	otherUid.Uid = "another-lifetime"
	none, err = cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, otherUid)
	require.NoError(t, err)
	assert.Nil(t, none)
	none, err = cache.GetDecoded[*pbresource.Tenancy](c, albumType, "label", "none")
	require.NoError(t, err)
	assert.Nil(t, none)
	list, err := cache.ListDecoded[*pbresource.Tenancy](c, albumType, "label", "none")
	require.NoError(t, err)
	assert.Empty(t, list)

	// Get on a key with several resources is an error, as for Get.
	_, err = cache.GetDecoded[*pbresource.Tenancy](c, albumType, cache.OwnerIndex, cache.OwnerKey(owner))
	assert.Error(t, err)

	// An update is read as its new data, never the old decoded one.
	_, err = cc.Upsert(withData(t, res(albumType, "low", "3", owner, nil), "low-data-2"))
	require.NoError(t, err)
	ro, err = cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, id(albumType, "low"))
	require.NoError(t, err)
	assert.Equal(t, "low-data-2", ro.Data.Partition)
	assert.Equal(t, "3", ro.Resource.Version)
}

func TestDecodedReadOnlyIsDecodedOnce(t *testing.T) {
	c := newCache(t)
	_, err := c.Upsert(withData(t, res(albumType, "low", "1", nil, nil), "low-data"))
	require.NoError(t, err)
	first, err := cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, id(albumType, "low"))
	require.NoError(t, err)
	second, err := cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, id(albumType, "low"))
	require.NoError(t, err)
	assert.Same(t, first, second, "the second read shares the first one's decoded resource")
	listed, err := cache.ListDecodedReadOnly[*pbresource.Tenancy](c, albumType, cache.IDIndex, cache.Key(id(albumType, "low")))
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Same(t, first, listed[0])
	stored, err := c.ListReadOnly(albumType, cache.IDIndex, cache.Key(id(albumType, "low")))
	require.NoError(t, err)
	assert.Same(t, stored[0], first.Resource, "the read-only form points at the stored resource")

	copied, err := cache.GetDecodedByID[*pbresource.Tenancy](c, id(albumType, "low"))
	require.NoError(t, err)
	assert.NotSame(t, first.Data, copied.Data)
	assert.NotSame(t, first.Resource, copied.Resource)
	assert.True(t, proto.Equal(first.Data, copied.Data))
	assert.True(t, proto.Equal(first.Resource, copied.Resource))

	low := id(albumType, "low")
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, low); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "a read-only read of a decoded resource allocates nothing")
}

// TestDecodedSurvivesUpdatesOfOtherFields checks that a new version of a
// resource whose Data did not change (a status write, say) shares the
// decoded message of the version it replaces, while new Data is decoded
// afresh.
func TestDecodedSurvivesUpdatesOfOtherFields(t *testing.T) {
	c := newCache(t)
	low := id(albumType, "low")
	v1 := withData(t, res(albumType, "low", "1", nil, nil), "low-data")
	_, err := c.Upsert(v1)
	require.NoError(t, err)
	first, err := cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, low)
	require.NoError(t, err)

	// Same Data message, as the in-memory store shares it; then equal bytes
	// in a new message, as a gRPC stream decodes them.
	v2 := res(albumType, "low", "2", nil, map[string]string{"k": "v"})
	v2.Data = v1.Data
	v3 := res(albumType, "low", "3", nil, nil)
	v3.Data = &anypb.Any{TypeUrl: v1.Data.TypeUrl, Value: append([]byte(nil), v1.Data.Value...)}
	for _, next := range []*pbresource.Resource{v2, v3} {
		_, err = c.Upsert(next)
		require.NoError(t, err)
		got, err := cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, low)
		require.NoError(t, err)
		assert.Same(t, first.Data, got.Data, "version %s decoded the same data again", next.Version)
		assert.Same(t, next, got.Resource, "the decoded form points at the new version")
	}

	_, err = c.Upsert(withData(t, res(albumType, "low", "4", nil, nil), "new-data"))
	require.NoError(t, err)
	got, err := cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, low)
	require.NoError(t, err)
	assert.Equal(t, "new-data", got.Data.Partition)
}

func TestDecodedReadOfAnotherMessage(t *testing.T) {
	c := newCache(t)
	_, err := c.Upsert(withData(t, res(albumType, "low", "1", nil, nil), "low-data"))
	require.NoError(t, err)
	_, err = c.Upsert(res(albumType, "empty", "2", nil, nil))
	require.NoError(t, err)

	_, err = cache.GetDecodedByID[*pbresource.Status](c, id(albumType, "low"))
	var parse resource.ErrDataParse
	require.ErrorAs(t, err, &parse)
	assert.Contains(t, err.Error(), "low", "the error names the resource")
	_, err = cache.GetDecodedByIDReadOnly[*pbresource.Status](c, id(albumType, "empty"))
	require.ErrorAs(t, err, &parse)
	_, err = cache.ListDecoded[*pbresource.Status](c, albumType, cache.IDIndex, cache.Key(id(albumType, "low")))
	require.ErrorAs(t, err, &parse)

	// The failed read caches nothing: the right type still reads.
	d, err := cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, id(albumType, "low"))
	require.NoError(t, err)
	assert.Equal(t, "low-data", d.Data.Partition)
	_, err = cache.GetDecodedByIDReadOnly[*pbresource.Status](c, id(albumType, "low"))
	assert.True(t, errors.As(err, &parse), "and the wrong one still fails after the right one is cached")
}

// TestDecodedReadsConcurrent races typed reads (which cache the decoded
// form) against each other and against updates; -race checks it.
func TestDecodedReadsConcurrent(t *testing.T) {
	c := newCache(t)
	owner := id(artistType, "bowie")
	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		_, err := c.Upsert(withData(t, res(albumType, n, "0", owner, nil), n))
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, n := range names {
					d, err := cache.GetDecodedByIDReadOnly[*pbresource.Tenancy](c, id(albumType, n))
					if err != nil || d == nil || d.Data.Partition != n {
						t.Errorf("read-only read of %s: %v %v", n, d, err)
						return
					}
					own, err := cache.GetDecodedByID[*pbresource.Tenancy](c, id(albumType, n))
					if err != nil || own == nil || own.Data.Partition != n {
						t.Errorf("read of %s: %v %v", n, own, err)
						return
					}
					own.Data.Partition = "mine" // the caller's copy
				}
				list, err := cache.ListDecodedReadOnly[*pbresource.Tenancy](c, albumType, cache.OwnerIndex, cache.OwnerKey(owner))
				if err != nil || len(list) != len(names) {
					t.Errorf("list: %d %v", len(list), err)
					return
				}
			}
		}()
	}
	for v := 1; v <= 200; v++ {
		n := names[v%len(names)]
		_, err := c.Upsert(withData(t, res(albumType, n, string(rune('0'+v%10)), owner, nil), n))
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
}
