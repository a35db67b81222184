package reconcile

import (
	"context"
	"errors"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/protobuf/proto"
)

// DecodedFunc reconciles one managed resource, read from the cache with its
// Data decoded as T.
type DecodedFunc[T proto.Message] func(ctx context.Context, rt Runtime, req Request, res *resource.Decoded[T]) error

// UndecodableFunc handles a managed resource whose Data could not be
// decoded (err wraps resource.ErrDataParse); res is the caller's own copy.
type UndecodableFunc func(ctx context.Context, rt Runtime, req Request, res *pbresource.Resource, err error) error

// DecodedOption configures AsDecoded.
type DecodedOption func(*decodedConfig)

type decodedConfig struct {
	readOnly    bool
	undecodable UndecodableFunc
}

// DecodedReadOnly makes AsDecoded hand fn the cache's own decoded resource
// instead of a copy: no copying at all, for reconcilers that only read the
// resource and the message (passing res.Resource to rt.WriteStatus or the
// finalizer helpers is reading). fn must then never change either, nor
// anything they point to.
func DecodedReadOnly() DecodedOption {
	return func(c *decodedConfig) { c.readOnly = true }
}

// OnUndecodable makes AsDecoded call fn for a resource whose Data does not
// decode as T (e.g. one stored under another version of the type), instead
// of failing the reconcile with a TerminalError.
func OnUndecodable(fn UndecodableFunc) DecodedOption {
	return func(c *decodedConfig) { c.undecodable = fn }
}

// AsDecoded returns a Reconciler that reads the request's resource from
// rt.Cache, decodes its Data as T (once per cached version of the resource;
// see cache.GetDecodedByID) and calls fn with it: the boilerplate of every
// reconciler, as controller-runtime's ObjectReconciler and Consul's
// GetDecodedResource spare it. fn gets its own copy unless DecodedReadOnly
// is given.
//
// The request names a resource by type, tenancy and name; a Uid in it is
// not a filter. A request that carries the Uid of an earlier lifetime (a
// change queued before the resource was deleted and created again, say)
// reconciles the resource that now has the name, since the work queue
// keys requests by name and the current resource is what must be brought
// in line. fn gets the request as it was queued: res.Resource.Id names the
// lifetime being reconciled.
//
// A resource the cache no longer holds (deleted) is skipped: fn is not
// called and the reconcile succeeds, as in controller-runtime. Clean-up
// that must happen on deletion belongs behind a finalizer, which keeps the
// resource (marked) in the cache until fn removes it. A resource whose Data does not decode
// as T ends the reconcile with a TerminalError, since retrying cannot help
// until it changes, unless OnUndecodable says otherwise.
func AsDecoded[T proto.Message](fn DecodedFunc[T], opts ...DecodedOption) Reconciler {
	r := decodedReconciler[T]{fn: fn}
	for _, o := range opts {
		o(&r.cfg)
	}
	return r
}

type decodedReconciler[T proto.Message] struct {
	fn  DecodedFunc[T]
	cfg decodedConfig
}

func (r decodedReconciler[T]) Reconcile(ctx context.Context, rt Runtime, req Request) error {
	read := cache.GetDecodedByID[T]
	if r.cfg.readOnly {
		read = cache.GetDecodedByIDReadOnly[T]
	}
	id := req.ID
	res, err := read(rt.Cache, id)
	if res == nil && err == nil && id.GetUid() != "" {
		// The cache matches a Uid when one is given: look again by name.
		// Only a request for a lifetime the cache no longer holds pays
		// for the copy.
		id = &pbresource.ID{Type: id.Type, Tenancy: id.Tenancy, Name: id.Name}
		res, err = read(rt.Cache, id)
	}
	if err != nil {
		var parse resource.ErrDataParse
		if !errors.As(err, &parse) {
			return err
		}
		if r.cfg.undecodable == nil {
			return TerminalError(err)
		}
		raw, getErr := rt.Cache.GetByID(id)
		if getErr != nil || raw == nil {
			return getErr
		}
		return r.cfg.undecodable(ctx, rt, req, raw, err)
	}
	if res == nil {
		return nil
	}
	return r.fn(ctx, rt, req, res)
}
