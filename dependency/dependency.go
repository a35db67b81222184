// Package dependency holds ready-made DependencyMappers: the functions that
// turn a change to a watched resource into the managed resources a
// controller must reconcile.
package dependency

import (
	"context"
	"fmt"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"google.golang.org/protobuf/proto"
)

// MapOwner reconciles the owner of the changed resource, if it has one, by
// name: the request names the owner's type, tenancy and name, without the
// Uid of the lifetime that owns the resource. So whatever resource now has
// the owner's name is reconciled, and an owner deleted and created again
// learns that a resource its earlier lifetime owned has changed or gone
// (typically: was reaped, so the new owner can create its own), as with
// controller-runtime's Owns.
func MapOwner(_ context.Context, _ reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
	if res.Owner == nil {
		return nil, nil
	}
	return ownerByName(res.Owner), nil
}

// MapOwnerFiltered is MapOwner for owners of type typ only (any
// GroupVersion); other owners are ignored.
func MapOwnerFiltered(typ *pbresource.Type) reconcile.DependencyMapper {
	return func(_ context.Context, _ reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
		if res.Owner == nil || !resource.EqualUnversionedType(res.Owner.Type, typ) {
			return nil, nil
		}
		return ownerByName(res.Owner), nil
	}
}

// ownerRequest holds the one request an owner mapper returns and its ID,
// so that both take a single allocation.
type ownerRequest struct {
	reqs [1]reconcile.Request
	id   pbresource.ID
}

// ownerByName returns a request for owner without its Uid. The ID shares
// owner's Type and Tenancy: a request's ID is read-only.
func ownerByName(owner *pbresource.ID) []reconcile.Request {
	o := &ownerRequest{}
	o.id.Type, o.id.Tenancy, o.id.Name = owner.Type, owner.Tenancy, owner.Name
	o.reqs[0].ID = &o.id
	return o.reqs[:]
}

// ReplaceType reconciles the resource of typ with the changed resource's
// tenancy and name: for controllers whose managed resources mirror another
// type one to one. The Uid is dropped, as it belongs to the other type.
func ReplaceType(typ *pbresource.Type) reconcile.DependencyMapper {
	return func(_ context.Context, _ reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
		return []reconcile.Request{{ID: &pbresource.ID{
			Type:    typ,
			Tenancy: res.Id.GetTenancy(),
			Name:    res.Id.GetName(),
		}}}, nil
	}
}

// MultiMapper runs every mapper and returns all their requests; the first
// error stops it.
func MultiMapper(mappers ...reconcile.DependencyMapper) reconcile.DependencyMapper {
	return func(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
		var out []reconcile.Request
		for _, m := range mappers {
			reqs, err := m(ctx, rt, res)
			if err != nil {
				return nil, err
			}
			out = append(out, reqs...)
		}
		return out, nil
	}
}

// MapByIndex reconciles the resources of indexedType found under the changed
// resource's cache.Key in the named index: "every Bar whose qux index points
// at this Zip". The index must be declared for indexedType by the
// controller (NewController or WithWatch) with keys built by cache.Key.
func MapByIndex(indexedType *pbresource.Type, index string) reconcile.DependencyMapper {
	return MapByIndexKeys(indexedType, index, func(res *pbresource.Resource) ([]string, error) {
		return []string{cache.Key(res.Id)}, nil
	})
}

// MapByIndexKeys is MapByIndex with the lookup keys computed by keys.
func MapByIndexKeys(indexedType *pbresource.Type, index string, keys func(res *pbresource.Resource) ([]string, error)) reconcile.DependencyMapper {
	return func(_ context.Context, rt reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
		ks, err := keys(res)
		if err != nil {
			return nil, err
		}
		var out []reconcile.Request
		for _, k := range ks {
			// The stored IDs, not copies: requests only carry them, and
			// nothing changes a request's ID (see reconcile.Request).
			ids, err := rt.Cache.ListIDsReadOnly(indexedType, index, k)
			if err != nil {
				return nil, fmt.Errorf("mapping %s through index %q: %w", resource.IDString(res.Id), index, err)
			}
			out = append(out, reconcile.RequestsFromIDs(ids)...)
		}
		return out, nil
	}
}

// MapOwned reconciles the resources of ownedType that the changed resource
// owns, found through the built-in owner index by the changed resource's
// Uid: resources owned by an earlier resource of the same name are not
// among them.
func MapOwned(ownedType *pbresource.Type) reconcile.DependencyMapper {
	return MapByIndexKeys(ownedType, cache.OwnerIndex, func(res *pbresource.Resource) ([]string, error) {
		return []string{cache.OwnerKey(res.Id)}, nil
	})
}

// ReferenceIndex returns a cache index over a reference (ID) held in the
// decoded data T, keyed with cache.Key, for use with MapByIndex: e.g. Bars
// indexed by the Zip their qux field names.
// A nil or nameless reference leaves the resource out of the index.
func ReferenceIndex[T proto.Message](name string, ref func(data T) resource.ReferenceOrID) *cache.Index {
	return cache.NewDecodedIndex(name, func(_ *pbresource.Resource, data T) (string, bool, error) {
		r := ref(data)
		// The Get methods of the generated types are nil-safe, so a typed
		// nil reference has an empty name.
		if r == nil || r.GetName() == "" {
			return "", false, nil
		}
		return cache.Key(r), true, nil
	})
}

// MapDecoded adapts a mapper written against the changed resource with its
// Data decoded as T. The resource is read-only, like the one a
// DependencyMapper gets; the decoded Data is the mapper's own. A resource whose Data is not a T (another
// version of the type, say) maps to nothing: retrying could not change
// that.
func MapDecoded[T proto.Message](fn func(ctx context.Context, rt reconcile.Runtime, res *resource.Decoded[T]) ([]reconcile.Request, error)) reconcile.DependencyMapper {
	return func(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
		decoded, err := resource.DecodeResource[T](res)
		if err != nil {
			return nil, nil
		}
		return fn(ctx, rt, decoded)
	}
}
