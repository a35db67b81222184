package cache_test

import (
	"testing"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var artistV2Type = &pbresource.Type{Group: "music", GroupVersion: "v2", Kind: "Artist"}

// TestReplaceGroupVersion checks that a GroupVersion's snapshot replaces
// only the cached resources stored under that GroupVersion.
func TestReplaceGroupVersion(t *testing.T) {
	c := newCache(t)
	_, _ = c.Upsert(res(artistType, "v1-gone", "1", nil, nil))
	_, _ = c.Upsert(res(artistType, "v1-kept", "2", nil, nil))
	_, _ = c.Upsert(res(artistV2Type, "v2", "3", nil, nil))

	events, err := c.ReplaceGroupVersion(artistType, []*pbresource.Resource{res(artistType, "v1-kept", "2", nil, nil)})
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.Equal(t, cache.Deleted, events[0].Kind)
	assert.Equal(t, "v1-gone", events[0].Resource.Id.Name)
	assert.Equal(t, 2, c.Len(artistType), "the v2 resource stays")
}

// TestUpsertNewer checks that an older state of the same resource is not
// applied, and that a resource created again (another Uid) is.
func TestUpsertNewer(t *testing.T) {
	c := newCache(t)
	_, _ = c.Upsert(res(artistType, "a", "10", nil, nil))

	_, applied, err := c.UpsertNewer(res(artistType, "a", "9", nil, nil))
	require.NoError(t, err)
	assert.False(t, applied, "an older version was applied")
	_, applied, _ = c.UpsertNewer(res(artistType, "a", "10", nil, nil))
	assert.False(t, applied, "the same version was applied again")
	old, applied, _ := c.UpsertNewer(res(artistType, "a", "11", nil, nil))
	assert.True(t, applied)
	assert.Equal(t, "10", old.Version)

	again := res(artistType, "a", "5", nil, nil)
	again.Id.Uid = "other"
	_, applied, _ = c.UpsertNewer(again)
	assert.True(t, applied, "another Uid is another resource")
}

// TestDeleteSame checks that a deletion of an earlier resource spares one
// created again under the same name.
func TestDeleteSame(t *testing.T) {
	c := newCache(t)
	_, _ = c.Upsert(res(artistType, "a", "10", nil, nil))
	earlier := id(artistType, "a")
	earlier.Uid = "earlier"
	gone, err := c.DeleteSame(earlier)
	require.NoError(t, err)
	assert.Nil(t, gone)
	assert.Equal(t, 1, c.Len(artistType))
	gone, _ = c.DeleteSame(id(artistType, "a"))
	require.NotNil(t, gone)
	assert.Equal(t, 0, c.Len(artistType))
}

// TestUpsertNewerVersions checks how versions compare: as numbers when
// they are, otherwise any other version is newer.
func TestUpsertNewerVersions(t *testing.T) {
	for _, tc := range []struct {
		cached, next string
		applied      bool
	}{{"9", "10", true}, {"10", "9", false}, {"a", "b", true}, {"a", "a", false}, {"7", "x", true}} {
		c := newCache(t)
		_, _ = c.Upsert(res(artistType, "a", tc.cached, nil, nil))
		_, applied, err := c.UpsertNewer(res(artistType, "a", tc.next, nil, nil))
		require.NoError(t, err)
		assert.Equal(t, tc.applied, applied, "%s after %s", tc.next, tc.cached)
	}
}

// TestDeleteOlder checks that a later state of a resource removes it, that
// a replayed older or equal state does not, and that another Uid's state
// does.
func TestDeleteOlder(t *testing.T) {
	c := newCache(t)
	_, _ = c.Upsert(res(artistType, "a", "10", nil, nil))

	gone, err := c.DeleteOlder(res(artistType, "a", "9", nil, nil))
	require.NoError(t, err)
	assert.Nil(t, gone, "an older state removed a newer one")
	gone, _ = c.DeleteOlder(res(artistType, "a", "10", nil, nil))
	assert.Nil(t, gone, "the same state removed it")
	assert.Equal(t, 1, c.Len(artistType))
	gone, _ = c.DeleteOlder(res(artistType, "a", "11", nil, nil))
	require.NotNil(t, gone)
	assert.Equal(t, "10", gone.Version)
	assert.Equal(t, 0, c.Len(artistType))
	gone, _ = c.DeleteOlder(res(artistType, "a", "12", nil, nil))
	assert.Nil(t, gone, "removed what the cache does not hold")

	_, _ = c.Upsert(res(artistType, "b", "10", nil, nil))
	other := res(artistType, "b", "5", nil, nil)
	other.Id.Uid = "other"
	gone, _ = c.DeleteOlder(other)
	assert.NotNil(t, gone, "another Uid is another resource")
}
