package cache

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// ReadOnlyCache is the view of the cache reconcilers, mappers and queries
// get. Every resource it returns is a fresh copy the caller owns, except from
// the methods named ReadOnly, which hand out the cache's own immutable
// resources without copying them.
type ReadOnlyCache interface {
	// Get returns the one resource of typ found under key in the named
	// index, or nil when there is none. It is an error to use Get on an
	// index that holds several resources under key.
	Get(typ *pbresource.Type, index, key string) (*pbresource.Resource, error)

	// GetByID returns the resource with id (its Uid must match when set),
	// or nil.
	GetByID(id *pbresource.ID) (*pbresource.Resource, error)

	// List returns the resources of typ found under key in the named index.
	List(typ *pbresource.Type, index, key string) ([]*pbresource.Resource, error)

	// ListIterator is List as an iterator, copying each resource only when
	// the caller reaches it.
	ListIterator(typ *pbresource.Type, index, key string) (ResourceIterator, error)

	// Parents returns the resources of typ whose key in the named index is
	// a prefix of key ending at a '/' (or key itself): for example, the
	// resources indexed by a tenancy that contains the given resource key.
	Parents(typ *pbresource.Type, index, key string) ([]*pbresource.Resource, error)

	// ListIDs returns the IDs of the resources List would return, without
	// copying the resources: what index-based dependency mappers need.
	ListIDs(typ *pbresource.Type, index, key string) ([]*pbresource.ID, error)

	// ListReadOnly is List without the copies: it returns the cache's own
	// stored resources, for hot paths that only read them (mappers, index
	// scans, filters). What the cache holds is immutable: the caller must
	// not change a returned resource or anything it points to, nor keep it
	// expecting it to change (an update stores a new resource). Copy one
	// with resource.Clone before changing or writing it back.
	ListReadOnly(typ *pbresource.Type, index, key string) ([]*pbresource.Resource, error)

	// ListIDsReadOnly is ListIDs without the copies: the stored resources'
	// own IDs, under the same rule as ListReadOnly (read them, never change
	// them; clone one with resource.CloneID to keep or change it).
	ListIDsReadOnly(typ *pbresource.Type, index, key string) ([]*pbresource.ID, error)

	// All returns every cached resource of typ.
	All(typ *pbresource.Type) ([]*pbresource.Resource, error)

	// Query runs the query registered under name.
	Query(name string, args ...any) (ResourceIterator, error)
}

// Query is a named, reusable lookup over the cache, registered with a
// controller (controller.WithQuery) and run with ReadOnlyCache.Query.
type Query interface {
	Run(c ReadOnlyCache, args ...any) (ResourceIterator, error)
}

// QueryFunc adapts a function to Query.
type QueryFunc func(c ReadOnlyCache, args ...any) (ResourceIterator, error)

// Run implements Query.
func (f QueryFunc) Run(c ReadOnlyCache, args ...any) (ResourceIterator, error) { return f(c, args...) }

// IndexQuery returns a Query that lists resources of typ under one key of
// the named index; the key is the query's single string argument. A
// controller that registers it checks at registration that it declares the
// index.
func IndexQuery(typ *pbresource.Type, index string) Query {
	return indexQuery{typ: typ, index: index}
}

type indexQuery struct {
	typ   *pbresource.Type
	index string
}

func (q indexQuery) Run(c ReadOnlyCache, args ...any) (ResourceIterator, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("query over index %q takes one key argument, got %d", q.index, len(args))
	}
	key, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("query over index %q takes a string key, got %T", q.index, args[0])
	}
	return c.ListIterator(q.typ, q.index, key)
}

// IndexUse reports the type and index the query reads.
func (q indexQuery) IndexUse() (*pbresource.Type, string) { return q.typ, q.index }

// ResourceIterator walks a result set; Next returns nil at the end.
type ResourceIterator interface {
	Next() *pbresource.Resource
}

// Cache is a concurrent, indexed store of resources by type. The zero value
// is not usable; call New.
type Cache struct {
	mu sync.RWMutex // guards queries, and serialises AddType
	// types maps each added type to its resources. AddType replaces the
	// map, never changes it, so every read and write of a resource finds
	// its type without taking mu.
	types   atomic.Pointer[map[resource.UnversionedType]*typeCache]
	queries map[string]Query

	// lastType is the Type of a resource Upsert stored and its typeCache
	// (typeCaches are never replaced), replaced when Upsert stores one of
	// another type. A stored resource's Type is immutable, and a backend
	// may share one Type message among the resources of a type
	// (storage/inmem does), so a read by an ID the cache handed out often
	// finds its typeCache by comparing a pointer instead of a map lookup.
	lastType atomic.Pointer[typeHit]

	// onIndexError is told about index functions that fail; it is set
	// before use and never changed.
	onIndexError func(index string, res *pbresource.Resource, err error)
}

// OnIndexError sets the function told when an index function fails for a
// resource (e.g. to log it). Such a resource is still cached, and found by
// its ID and the other indexes, but is left out of the failing index: one
// malformed resource must not stop a whole type from being cached. Call it
// before the cache is used.
func (c *Cache) OnIndexError(fn func(index string, res *pbresource.Resource, err error)) {
	c.onIndexError = fn
}

// New returns an empty cache.
func New() *Cache {
	c := &Cache{queries: make(map[string]Query)}
	c.types.Store(&map[resource.UnversionedType]*typeCache{})
	return c
}

// typeCache holds the resources of one type (all its versions).
type typeCache struct {
	cache   *Cache
	mu      sync.RWMutex
	typ     *pbresource.Type
	byID    idMap
	indexes map[string]*index
	list    []*index // indexes in definition order, owner first
	// applied is how far the type's changes are applied (see applied.go).
	applied Applied
}

// entry is one stored resource with the index buckets it sits in. Most
// entries sit in one or two buckets (owner, one custom index), which the
// inline array holds without a second allocation.
type entry struct {
	res    *pbresource.Resource
	refs   []indexRef
	inline [2]indexRef
	// decoded is res with its Data decoded, set by the first typed read
	// (see decoded.go) and never changed after.
	decoded atomic.Pointer[decodedSlot]
}

// AddType prepares the cache for typ with extra indexes. Adding a type again
// is allowed only with no further indexes, or indexes not yet defined.
func (c *Cache) AddType(typ *pbresource.Type, indexes ...*Index) error {
	if err := checkIndexes(indexes); err != nil {
		return fmt.Errorf("type %s: %w", resource.TypeString(typ), err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := resource.UnversionedTypeFrom(typ)
	types := *c.types.Load()
	tc, ok := types[key]
	if !ok {
		tc = &typeCache{
			cache:   c,
			typ:     &pbresource.Type{Group: typ.Group, GroupVersion: typ.GroupVersion, Kind: typ.Kind},
			byID:    newIDMap(),
			indexes: make(map[string]*index),
		}
		tc.addIndex(ownerIndex)
		// Publish the new type once its indexes are defined (deferred
		// calls run last to first: after tc.mu's unlock, before c.mu's).
		defer func() {
			grown := make(map[resource.UnversionedType]*typeCache, len(types)+1)
			for k, v := range types {
				grown[k] = v
			}
			grown[key] = tc
			c.types.Store(&grown)
		}()
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, ix := range indexes {
		if existing, ok := tc.indexes[ix.name]; ok {
			if existing.def == ix {
				continue
			}
			return fmt.Errorf("type %s: index %q is already defined by another controller", resource.TypeString(typ), ix.name)
		}
		tc.addIndex(ix)
		tc.byID.each(func(_ resource.NameKey, e *entry) bool {
			tc.indexEntry(tc.indexes[ix.name], e)
			return true
		})
	}
	return nil
}

func (tc *typeCache) addIndex(def *Index) {
	ix := &index{def: def, buckets: make(map[string]*bucket)}
	tc.indexes[def.name] = ix
	tc.list = append(tc.list, ix)
}

// HasType reports whether typ was added.
func (c *Cache) HasType(typ *pbresource.Type) bool {
	_, err := c.typeCache(typ)
	return err == nil
}

// HasIndex reports whether typ has an index called name.
func (c *Cache) HasIndex(typ *pbresource.Type, name string) bool {
	tc, err := c.typeCache(typ)
	if err != nil {
		return false
	}
	if name == IDIndex {
		return true
	}
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	_, ok := tc.indexes[name]
	return ok
}

// typeHit is a Type known immutable and its typeCache (Cache.lastType).
type typeHit struct {
	typ *pbresource.Type
	tc  *typeCache
}

func (c *Cache) typeCache(typ *pbresource.Type) (*typeCache, error) {
	if h := c.lastType.Load(); h != nil && h.typ == typ && typ != nil {
		return h.tc, nil
	}
	tc, ok := (*c.types.Load())[resource.UnversionedTypeFrom(typ)]
	if !ok {
		return nil, fmt.Errorf("the cache does not hold type %s: watch it (controller.WithWatch) to read it from the cache", resource.TypeString(typ))
	}
	return tc, nil
}

// Upsert stores res as it is, without copying it (res is immutable from then
// on: neither the caller nor anyone else may change it), and returns the
// resource it replaced, if any. An index
// function's error leaves res out of that index (see OnIndexError).
func (c *Cache) Upsert(res *pbresource.Resource) (old *pbresource.Resource, err error) {
	typ := res.GetId().GetType()
	tc, err := c.typeCache(typ)
	if err != nil {
		return nil, err
	}
	if h := c.lastType.Load(); h == nil || h.tc != tc {
		c.lastType.Store(&typeHit{typ: typ, tc: tc})
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.upsert(res)
}

func (tc *typeCache) upsert(res *pbresource.Resource) (*pbresource.Resource, error) {
	e := &entry{res: res}
	e.refs = e.inline[:0]
	k := resource.NameKeyOf(res.Id)
	for _, ix := range tc.list {
		tc.indexEntry(ix, e)
	}
	var old *pbresource.Resource
	if prev := tc.byID.swap(k, e); prev != nil {
		old = prev.res
		removeEntry(prev)
		inheritDecoded(e, prev)
	}
	return old, nil
}

// indexEntry adds e to ix under the keys the index function gives; when
// the function fails, e stays out of ix and the failure is reported.
func (tc *typeCache) indexEntry(ix *index, e *entry) {
	if one := ix.def.one; one != nil {
		k, ok, err := one(e.res)
		if err != nil {
			if report := tc.cache.onIndexError; report != nil {
				report(ix.def.name, e.res, err)
			}
			return
		}
		if ok {
			ix.insert(e, k)
		}
		return
	}
	keys, err := ix.def.keys(e.res)
	if err == nil && !ix.def.multi && len(keys) > 1 {
		err = fmt.Errorf("single-valued index returned %d keys", len(keys))
	}
	if err != nil {
		if report := tc.cache.onIndexError; report != nil {
			report(ix.def.name, e.res, err)
		}
		return
	}
	for _, k := range keys {
		ix.insert(e, k)
	}
}

// Delete removes the resource with id (any Uid) and returns it, or nil.
func (c *Cache) Delete(id *pbresource.ID) (*pbresource.Resource, error) {
	tc, err := c.typeCache(id.GetType())
	if err != nil {
		return nil, err
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.delete(resource.NameKeyOf(id)), nil
}

func (tc *typeCache) delete(k resource.NameKey) *pbresource.Resource {
	e, ok := tc.byID.remove(k)
	if !ok {
		return nil
	}
	removeEntry(e)
	return e.res
}

// AddQuery registers a named query. Registering a name twice is an error.
func (c *Cache) AddQuery(name string, q Query) error {
	if name == "" || q == nil {
		return fmt.Errorf("a query needs a name and a function")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.queries[name]; ok {
		return fmt.Errorf("query %q is already registered", name)
	}
	c.queries[name] = q
	return nil
}

// Len returns the number of cached resources of typ.
func (c *Cache) Len(typ *pbresource.Type) int {
	tc, err := c.typeCache(typ)
	if err != nil {
		return 0
	}
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	return tc.byID.len()
}
