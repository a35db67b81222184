package cache

import (
	"strconv"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// UpsertNewer is Upsert unless the cache holds the same resource (same
// Uid) at res's version or a later one; it reports whether res was stored.
// It keeps a cache fed by a server whose streams may replay older states
// (a stale snapshot's catch-up, Consul) from going back in time. Versions
// are compared as numbers; ones that are not numbers are always newer.
func (c *Cache) UpsertNewer(res *pbresource.Resource) (old *pbresource.Resource, applied bool, err error) {
	tc, err := c.typeCache(res.GetId().GetType())
	if err != nil {
		return nil, false, err
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if prev, ok := tc.byID.get(resource.NameKeyOf(res.Id)); ok && prev.res.GetId().GetUid() == res.GetId().GetUid() &&
		!versionAfter(res.Version, prev.res.Version) {
		return nil, false, nil
	}
	old, err = tc.upsert(res)
	return old, err == nil, err
}

// DeleteOlder removes the cached resource with res's ID unless the cache
// holds the same resource (same Uid) at res's version or a later one, and
// returns what it removed (nil if nothing). It is UpsertNewer for a state
// of a resource the cache is not to hold (it left the cache's label
// selection): a replayed older state does not remove a newer one.
func (c *Cache) DeleteOlder(res *pbresource.Resource) (*pbresource.Resource, error) {
	tc, err := c.typeCache(res.GetId().GetType())
	if err != nil {
		return nil, err
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	k := resource.NameKeyOf(res.Id)
	prev, ok := tc.byID.get(k)
	if !ok || prev.res.GetId().GetUid() == res.GetId().GetUid() && !versionAfter(res.Version, prev.res.Version) {
		return nil, nil
	}
	return tc.delete(k), nil
}

// DeleteSame is Delete of exactly id: it removes the cached resource only
// when it has id's Uid (or either Uid is empty), so that a replayed
// deletion of an earlier incarnation spares a resource created again
// under the same name.
func (c *Cache) DeleteSame(id *pbresource.ID) (*pbresource.Resource, error) {
	tc, err := c.typeCache(id.GetType())
	if err != nil {
		return nil, err
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	k := resource.NameKeyOf(id)
	prev, ok := tc.byID.get(k)
	if !ok {
		return nil, nil
	}
	if u := prev.res.GetId().GetUid(); u != "" && id.GetUid() != "" && u != id.GetUid() {
		return nil, nil
	}
	return tc.delete(k), nil
}

// versionAfter reports whether version a is after b: as numbers when both
// are, otherwise whenever they differ.
func versionAfter(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return a != b
	}
	return x > y
}
