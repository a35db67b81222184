package cache

import (
	"bytes"
	"fmt"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Typed reads: the resources of a lookup with their Data decoded as T.
//
// The cache decodes a stored resource at most once per Go message type it
// is read as (in practice: once), on the first typed read, and keeps the
// result with the resource until an update or deletion replaces it. What it
// keeps is immutable like the resource itself. GetDecoded, GetDecodedByID
// and ListDecoded hand out copies the caller owns (a clone of the resource
// and of the decoded message); their ReadOnly twins hand out the cache's own
// *resource.Decoded, which the caller must never change, for hot paths that
// only read.
//
// A resource whose Data does not hold T (another GroupVersion of the type,
// say) is an error naming the resource, wrapping resource.ErrDataParse.
//
// On a ReadOnlyCache other than *Cache (a test double, say) the functions
// fall back to its methods and decode on every read.

// decodedSlot holds an entry's decoded resource: v is a
// *resource.Decoded[T] for the T it was first read as, and box the
// allocation that holds both.
type decodedSlot struct {
	v   any
	box rebinder
}

// rebinder makes the slot of a new entry whose Data is the same as its own.
type rebinder interface {
	rebind(res *pbresource.Resource) *decodedSlot
}

func (b *decodedBox[T]) rebind(res *pbresource.Resource) *decodedSlot {
	nb := &decodedBox[T]{d: resource.Decoded[T]{Resource: res, Data: b.d.Data}}
	nb.slot = decodedSlot{v: &nb.d, box: nb}
	return &nb.slot
}

// inheritDecoded gives e, the entry replacing prev, prev's decoded Data
// when both hold the same Data (a status write changes no data): the
// decoded message is immutable, so the new entry shares it instead of
// decoding the same bytes again.
func inheritDecoded(e, prev *entry) {
	s := prev.decoded.Load()
	if s == nil || !sameData(e.res.Data, prev.res.Data) {
		return
	}
	e.decoded.CompareAndSwap(nil, s.box.rebind(e.res))
}

// sameData reports whether a and b hold the same message bytes.
func sameData(a, b *anypb.Any) bool {
	if a == nil || b == nil {
		return false
	}
	return a == b || (a.TypeUrl == b.TypeUrl && bytes.Equal(a.Value, b.Value))
}

// decodedBox puts the slot and the decoded resource it points at in one
// allocation.
type decodedBox[T proto.Message] struct {
	slot decodedSlot
	d    resource.Decoded[T]
}

// decodedOf returns e's resource decoded as T: the one cached in e, or a new
// one that it caches when e holds none yet. The result is shared.
func decodedOf[T proto.Message](e *entry) (*resource.Decoded[T], error) {
	s := e.decoded.Load()
	if s != nil {
		if d, ok := s.v.(*resource.Decoded[T]); ok {
			return d, nil
		}
	}
	data, err := resource.Decode[T](e.res)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", resource.IDString(e.res.Id), err)
	}
	box := &decodedBox[T]{d: resource.Decoded[T]{Resource: e.res, Data: data}}
	if s != nil {
		// Read as another message type before: keep that one cached.
		return &box.d, nil
	}
	box.slot = decodedSlot{v: &box.d, box: box}
	if !e.decoded.CompareAndSwap(nil, &box.slot) {
		// A concurrent read cached it first: share the winner's.
		if d, ok := e.decoded.Load().v.(*resource.Decoded[T]); ok {
			return d, nil
		}
	}
	return &box.d, nil
}

// copyDecoded returns the caller's own copy of a shared decoded resource.
func copyDecoded[T proto.Message](d *resource.Decoded[T]) *resource.Decoded[T] {
	return &resource.Decoded[T]{Resource: resource.Clone(d.Resource), Data: proto.Clone(d.Data).(T)}
}

// GetDecoded is ReadOnlyCache.Get with the resource's Data decoded as T: the
// caller's own copy, or nil when there is none.
func GetDecoded[T proto.Message](c ReadOnlyCache, typ *pbresource.Type, index, key string) (*resource.Decoded[T], error) {
	if _, ok := c.(*Cache); !ok {
		return GetDecodedReadOnly[T](c, typ, index, key) // Get copied already
	}
	d, err := GetDecodedReadOnly[T](c, typ, index, key)
	if d == nil || err != nil {
		return nil, err
	}
	return copyDecoded(d), nil
}

// GetDecodedReadOnly is GetDecoded without the copy: the cache's own
// decoded resource, which the caller must never change.
func GetDecodedReadOnly[T proto.Message](c ReadOnlyCache, typ *pbresource.Type, index, key string) (*resource.Decoded[T], error) {
	cc, ok := c.(*Cache)
	if !ok {
		res, err := c.Get(typ, index, key)
		if res == nil || err != nil {
			return nil, err
		}
		return decodeFresh[T](res)
	}
	entries, err := lookupEach(cc, typ, index, key, func(e *entry) *entry { return e })
	switch {
	case err != nil:
		return nil, err
	case len(entries) == 0:
		return nil, nil
	case len(entries) > 1:
		return nil, fmt.Errorf("index %q of %s holds %d resources under %q; use ListDecoded", index, resource.TypeString(typ), len(entries), key)
	}
	return decodedOf[T](entries[0])
}

// GetDecodedByID is ReadOnlyCache.GetByID with the resource's Data decoded
// as T: the caller's own copy, or nil when there is none.
func GetDecodedByID[T proto.Message](c ReadOnlyCache, id *pbresource.ID) (*resource.Decoded[T], error) {
	if _, ok := c.(*Cache); !ok {
		return GetDecodedByIDReadOnly[T](c, id) // GetByID copied already
	}
	d, err := GetDecodedByIDReadOnly[T](c, id)
	if d == nil || err != nil {
		return nil, err
	}
	return copyDecoded(d), nil
}

// GetDecodedByIDReadOnly is GetDecodedByID without the copy: the cache's
// own decoded resource, which the caller must never change.
func GetDecodedByIDReadOnly[T proto.Message](c ReadOnlyCache, id *pbresource.ID) (*resource.Decoded[T], error) {
	cc, ok := c.(*Cache)
	if !ok {
		res, err := c.GetByID(id)
		if res == nil || err != nil {
			return nil, err
		}
		return decodeFresh[T](res)
	}
	e, err := cc.entryByID(id)
	if e == nil || err != nil {
		return nil, err
	}
	return decodedOf[T](e)
}

// entryByID returns the entry of the resource with id (its Uid must match
// when set), or nil.
func (c *Cache) entryByID(id *pbresource.ID) (*entry, error) {
	tc, err := c.typeCache(id.GetType())
	if err != nil {
		return nil, err
	}
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	e, ok := tc.byID.get(resource.NameKeyOf(id))
	if !ok || (id.Uid != "" && e.res.Id.Uid != id.Uid) {
		return nil, nil
	}
	return e, nil
}

// ListDecoded is ReadOnlyCache.List with every resource's Data decoded as
// T: the caller's own copies.
func ListDecoded[T proto.Message](c ReadOnlyCache, typ *pbresource.Type, index, key string) ([]*resource.Decoded[T], error) {
	if _, ok := c.(*Cache); !ok {
		return listDecodedFallback[T](c.List(typ, index, key))
	}
	out, err := ListDecodedReadOnly[T](c, typ, index, key)
	if err != nil {
		return nil, err
	}
	for i, d := range out {
		out[i] = copyDecoded(d)
	}
	return out, nil
}

// ListDecodedReadOnly is ListDecoded without the copies: the cache's own
// decoded resources, which the caller must never change.
func ListDecodedReadOnly[T proto.Message](c ReadOnlyCache, typ *pbresource.Type, index, key string) ([]*resource.Decoded[T], error) {
	cc, ok := c.(*Cache)
	if !ok {
		return listDecodedFallback[T](c.ListReadOnly(typ, index, key))
	}
	entries, err := lookupEach(cc, typ, index, key, func(e *entry) *entry { return e })
	if err != nil || len(entries) == 0 {
		return nil, err
	}
	out := make([]*resource.Decoded[T], len(entries))
	for i, e := range entries {
		if out[i], err = decodedOf[T](e); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func decodeFresh[T proto.Message](res *pbresource.Resource) (*resource.Decoded[T], error) {
	d, err := resource.DecodeResource[T](res)
	if err != nil {
		return nil, fmt.Errorf("resource %s: %w", resource.IDString(res.Id), err)
	}
	return d, nil
}

func listDecodedFallback[T proto.Message](list []*pbresource.Resource, err error) ([]*resource.Decoded[T], error) {
	if err != nil || len(list) == 0 {
		return nil, err
	}
	out := make([]*resource.Decoded[T], len(list))
	for i, res := range list {
		if out[i], err = decodeFresh[T](res); err != nil {
			return nil, err
		}
	}
	return out, nil
}
