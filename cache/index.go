package cache

import (
	"fmt"
	"strings"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/protobuf/proto"
)

// Names of the indexes every type has.
const (
	// IDIndex finds a resource by Key of its ID.
	IDIndex = "id"
	// OwnerIndex finds resources by their owner's Uid: look them up under
	// OwnerKey of the owner's ID. Keying by Uid rather than by name means
	// the resources of an earlier owner with the same name (deleted, its
	// owned resources not yet reaped) are not found under a new one.
	OwnerIndex = "owner"
)

// Index is a secondary index of a type: a function from a resource to the
// keys it should be found under. Create one with NewIndex or NewMultiIndex.
type Index struct {
	name  string
	multi bool
	keys  func(res *pbresource.Resource) ([]string, error)
	// one is a single-valued index's function, called directly on insert
	// so that indexing a resource allocates no one-key slice.
	one func(res *pbresource.Resource) (key string, ok bool, err error)
}

// Name returns the index's name.
func (i *Index) Name() string { return i.name }

// NewIndex returns a single-valued index: fn gives each resource at most one
// key (ok=false leaves the resource out of the index).
func NewIndex(name string, fn func(res *pbresource.Resource) (key string, ok bool, err error)) *Index {
	return &Index{name: name, one: fn, keys: func(res *pbresource.Resource) ([]string, error) {
		k, ok, err := fn(res)
		if err != nil || !ok {
			return nil, err
		}
		return []string{k}, nil
	}}
}

// NewMultiIndex returns an index under which a resource may be found by
// several keys (e.g. one per reference it holds).
func NewMultiIndex(name string, fn func(res *pbresource.Resource) ([]string, error)) *Index {
	return &Index{name: name, multi: true, keys: fn}
}

// NewDecodedIndex is NewIndex over the resource's decoded Data of type T.
// Resources whose Data holds another message (e.g. another GroupVersion of
// the type, which the cache holds too) are left out of the index.
func NewDecodedIndex[T proto.Message](name string, fn func(res *pbresource.Resource, data T) (key string, ok bool, err error)) *Index {
	return NewIndex(name, func(res *pbresource.Resource) (string, bool, error) {
		if !holds[T](res) {
			return "", false, nil
		}
		data, err := resource.Decode[T](res)
		if err != nil {
			return "", false, err
		}
		return fn(res, data)
	})
}

// NewDecodedMultiIndex is NewMultiIndex over the resource's decoded Data;
// like NewDecodedIndex, it skips resources holding another message.
func NewDecodedMultiIndex[T proto.Message](name string, fn func(res *pbresource.Resource, data T) ([]string, error)) *Index {
	return NewMultiIndex(name, func(res *pbresource.Resource) ([]string, error) {
		if !holds[T](res) {
			return nil, nil
		}
		data, err := resource.Decode[T](res)
		if err != nil {
			return nil, err
		}
		return fn(res, data)
	})
}

// ownerIndex is the built-in owner index. A resource whose owner has no Uid
// stays out of it; neither Loom's service nor Consul's stores such an owner
// (both resolve the owner's Uid on Write).
var ownerIndex = NewIndex(OwnerIndex, func(res *pbresource.Resource) (string, bool, error) {
	if uid := res.GetOwner().GetUid(); uid != "" {
		return uid, true, nil
	}
	return "", false, nil
})

// OwnerKey returns the OwnerIndex key of the resources owned by owner: its
// Uid. Pass the owner's ID as the cache or the service returned it, which
// carries the Uid; a reconcile.Request's ID may not. An ID without a Uid gives
// the empty key, which the cache refuses with an error rather than finding
// nothing.
func OwnerKey(owner *pbresource.ID) string {
	return owner.GetUid()
}

// checkOwnerKey catches owner index lookups that cannot find anything: an
// empty key (an owner ID without its Uid) or a key built with Key (by name,
// which the owner index no longer uses). A Uid never holds a '/'.
func checkOwnerKey(key string) error {
	if key == "" {
		return fmt.Errorf("the %q index is keyed by the owner's Uid and the key is empty: build it with cache.OwnerKey from the owner's ID as stored (with its Uid)", OwnerIndex)
	}
	if strings.IndexByte(key, '/') >= 0 {
		return fmt.Errorf("%q is not a key of the %q index, which is keyed by the owner's Uid: build it with cache.OwnerKey, not cache.Key", key, OwnerIndex)
	}
	return nil
}

// index holds the buckets of one Index for one type.
type index struct {
	def     *Index
	buckets map[string]*bucket
}

// bucket is the set of entries sharing one key of one index. Entries
// remember their slot so removal is O(1): the last entry moves into the gap.
type bucket struct {
	ix      *index
	key     string
	entries []*entry
	refPos  []int32 // refPos[i]: which of entries[i].refs points here
}

// indexRef records that an entry sits in bucket b at slot.
type indexRef struct {
	b    *bucket
	slot int32
}

func (ix *index) insert(e *entry, key string) {
	b := ix.buckets[key]
	if b == nil {
		b = &bucket{ix: ix, key: key}
		ix.buckets[key] = b
	}
	e.refs = append(e.refs, indexRef{b: b, slot: int32(len(b.entries))})
	b.entries = append(b.entries, e)
	b.refPos = append(b.refPos, int32(len(e.refs)-1))
}

// removeEntry takes e out of every bucket it is in; a bucket left empty is
// dropped from its index.
func removeEntry(e *entry) {
	for _, ref := range e.refs {
		b := ref.b
		last := int32(len(b.entries) - 1)
		if ref.slot != last {
			moved := b.entries[last]
			movedRef := b.refPos[last]
			b.entries[ref.slot] = moved
			b.refPos[ref.slot] = movedRef
			moved.refs[movedRef].slot = ref.slot
		}
		b.entries[last] = nil
		b.entries = b.entries[:last]
		b.refPos = b.refPos[:last]
		if last == 0 {
			delete(b.ix.buckets, b.key)
		}
	}
	e.refs = e.refs[:0]
	// The entry shares its block with the resource, which outlives it when
	// it is handed out as the old copy: let go of the buckets.
	e.inline = [2]indexRef{}
}

func checkIndexes(defs []*Index) error {
	seen := map[string]bool{IDIndex: true, OwnerIndex: true}
	for _, d := range defs {
		if d == nil || d.keys == nil {
			return fmt.Errorf("nil index")
		}
		if d.name == "" {
			return fmt.Errorf("an index needs a name")
		}
		if seen[d.name] {
			return fmt.Errorf("index %q is defined twice (or shadows a built-in index)", d.name)
		}
		seen[d.name] = true
	}
	return nil
}

// holds reports whether res's Data is a T (by the Any's type name).
func holds[T proto.Message](res *pbresource.Resource) bool {
	var zero T
	return res.GetData() != nil && res.Data.MessageName() == zero.ProtoReflect().Descriptor().FullName()
}
