package cache

import (
	"fmt"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

var _ ReadOnlyCache = (*Cache)(nil)

// Get implements ReadOnlyCache.
func (c *Cache) Get(typ *pbresource.Type, index, key string) (*pbresource.Resource, error) {
	shared, err := c.lookup(typ, index, key)
	switch {
	case err != nil:
		return nil, err
	case len(shared) == 0:
		return nil, nil
	case len(shared) > 1:
		return nil, fmt.Errorf("index %q of %s holds %d resources under %q; use List", index, resource.TypeString(typ), len(shared), key)
	}
	return resource.Clone(shared[0]), nil
}

// parseKey splits a Key into the part the id index uses.
func parseKey(key string) (resource.NameKey, bool) {
	var parts [4]string
	n := 0
	start := 0
	for i := 0; i < len(key) && n < 3; i++ {
		if key[i] == '/' {
			parts[n] = key[start:i]
			n++
			start = i + 1
		}
	}
	if n != 3 {
		return resource.NameKey{}, false
	}
	return resource.NameKey{Partition: parts[1], Namespace: parts[2], Name: key[start:]}, true
}

// GetByID implements ReadOnlyCache.
func (c *Cache) GetByID(id *pbresource.ID) (*pbresource.Resource, error) {
	e, err := c.entryByID(id)
	if e == nil {
		return nil, err
	}
	return resource.Clone(e.res), nil // outside the lock: what an entry holds is immutable
}

func (tc *typeCache) index(name string) (*index, error) {
	ix, ok := tc.indexes[name]
	if !ok {
		return nil, fmt.Errorf("type %s has no index %q", resource.TypeString(tc.typ), name)
	}
	return ix, nil
}

// List implements ReadOnlyCache.
func (c *Cache) List(typ *pbresource.Type, index, key string) ([]*pbresource.Resource, error) {
	shared, err := c.lookup(typ, index, key)
	if err != nil {
		return nil, err
	}
	for i, r := range shared {
		shared[i] = resource.Clone(r)
	}
	return shared, nil
}

// lookup returns the stored (shared) resources under key; callers clone.
func (c *Cache) lookup(typ *pbresource.Type, index, key string) ([]*pbresource.Resource, error) {
	return lookupEach(c, typ, index, key, func(e *entry) *pbresource.Resource { return e.res })
}

// lookupIDs is lookup for the stored resources' IDs.
func (c *Cache) lookupIDs(typ *pbresource.Type, index, key string) ([]*pbresource.ID, error) {
	return lookupEach(c, typ, index, key, func(e *entry) *pbresource.ID { return e.res.Id })
}

// lookupEach returns pick of every stored entry under key of index, in the
// index's order. What pick returns is shared with the cache.
func lookupEach[T any](c *Cache, typ *pbresource.Type, index, key string, pick func(*entry) T) ([]T, error) {
	if index == OwnerIndex {
		if err := checkOwnerKey(key); err != nil {
			return nil, err
		}
	}
	tc, err := c.typeCache(typ)
	if err != nil {
		return nil, err
	}
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	if index == IDIndex {
		k, ok := parseKey(key)
		if !ok {
			return nil, fmt.Errorf("%q is not a resource key (see cache.Key)", key)
		}
		if e, ok := tc.byID.get(k); ok {
			return []T{pick(e)}, nil
		}
		return nil, nil
	}
	ix, err := tc.index(index)
	if err != nil {
		return nil, err
	}
	b := ix.buckets[key]
	if b == nil {
		return nil, nil
	}
	out := make([]T, len(b.entries))
	for i, e := range b.entries {
		out[i] = pick(e)
	}
	return out, nil
}

// ListIDs implements ReadOnlyCache.
func (c *Cache) ListIDs(typ *pbresource.Type, index, key string) ([]*pbresource.ID, error) {
	shared, err := c.lookupIDs(typ, index, key)
	if err != nil {
		return nil, err
	}
	return resource.CloneIDs(shared), nil
}

// ListReadOnly implements ReadOnlyCache.
func (c *Cache) ListReadOnly(typ *pbresource.Type, index, key string) ([]*pbresource.Resource, error) {
	return c.lookup(typ, index, key)
}

// ListIDsReadOnly implements ReadOnlyCache.
func (c *Cache) ListIDsReadOnly(typ *pbresource.Type, index, key string) ([]*pbresource.ID, error) {
	return c.lookupIDs(typ, index, key)
}

// ListIterator implements ReadOnlyCache.
func (c *Cache) ListIterator(typ *pbresource.Type, index, key string) (ResourceIterator, error) {
	shared, err := c.lookup(typ, index, key)
	if err != nil {
		return nil, err
	}
	return &sliceIterator{items: shared, clone: true}, nil
}

// Parents implements ReadOnlyCache.
func (c *Cache) Parents(typ *pbresource.Type, index, key string) ([]*pbresource.Resource, error) {
	tc, err := c.typeCache(typ)
	if err != nil {
		return nil, err
	}
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	ix, err := tc.index(index)
	if err != nil {
		return nil, err
	}
	var out []*pbresource.Resource
	collect := func(k string) {
		if b := ix.buckets[k]; b != nil {
			for _, e := range b.entries {
				out = append(out, resource.Clone(e.res))
			}
		}
	}
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			collect(key[:i+1])
			collect(key[:i])
		}
	}
	collect(key)
	return out, nil
}

// All implements ReadOnlyCache.
func (c *Cache) All(typ *pbresource.Type) ([]*pbresource.Resource, error) {
	tc, err := c.typeCache(typ)
	if err != nil {
		return nil, err
	}
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	out := make([]*pbresource.Resource, 0, tc.byID.len())
	tc.byID.each(func(_ resource.NameKey, e *entry) bool {
		out = append(out, resource.Clone(e.res))
		return true
	})
	return out, nil
}

// IDs returns the IDs of every cached resource of typ (copies).
func (c *Cache) IDs(typ *pbresource.Type) ([]*pbresource.ID, error) {
	tc, err := c.typeCache(typ)
	if err != nil {
		return nil, err
	}
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	ids := make([]*pbresource.ID, 0, tc.byID.len())
	tc.byID.each(func(_ resource.NameKey, e *entry) bool {
		ids = append(ids, e.res.Id)
		return true
	})
	return resource.CloneIDs(ids), nil
}

// Query implements ReadOnlyCache.
func (c *Cache) Query(name string, args ...any) (ResourceIterator, error) {
	c.mu.RLock()
	q, ok := c.queries[name]
	c.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("no query named %q is registered", name)
	}
	return q.Run(c, args...)
}

// sliceIterator walks a result set. With clone set the items are the
// cache's own and each is copied when reached; otherwise they already
// belong to the caller.
type sliceIterator struct {
	items []*pbresource.Resource
	next  int
	clone bool
}

func (it *sliceIterator) Next() *pbresource.Resource {
	if it.next >= len(it.items) {
		return nil
	}
	r := it.items[it.next]
	it.next++
	if it.clone {
		it.items[it.next-1] = nil // the copy is handed out; drop the cache's
		return resource.Clone(r)
	}
	return r
}

// NewIterator returns a ResourceIterator over resources the caller already
// owns (they are handed out as they are, without copying). Queries use it to
// return their results.
func NewIterator(resources []*pbresource.Resource) ResourceIterator {
	return &sliceIterator{items: resources}
}
