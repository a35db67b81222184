package controller

// Read-your-own-writes (DESIGN.md). Versions are store-wide and grow with
// every write, so once a reconcile's writes have returned versions, "the
// cache has caught up with them" is one comparison per type written: the
// version up to which the cache has applied the type (cache.Applied, fed
// by the watches) against the newest version the reconcile wrote of
// it. The worker hands the key back to the queue at once, behind a gate
// (queue.Gate) holding those versions, and goes on with other keys. The
// queue asks the gate only when the key is added again; by then the cache
// has most often applied the write that added it (the watch marks its
// progress before it queues keys), and the key goes to a worker at once.
// Otherwise the key waits, de-duplicated, until the cache catches up (see
// holds.go). A bound keeps a cache that never catches up from holding a
// key for good.

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// DefaultReadYourWritesBound is how long a key waits, at most, for the
// cache to hold what its last reconcile wrote (see
// Controller.WithReadYourWrites).
const DefaultReadYourWritesBound = time.Second

// writtenType is the newest version a reconcile wrote of one type, and how
// far the cache has applied that type.
type writtenType struct {
	typ     *pbresource.Type
	applied *cache.Applied
	version uint64
}

// writeRecorder is rt.Client in a worker's reconciles: the Manager's
// client, noting per type the newest version a Write or WriteStatus
// returned, and whether a write was refused as a conflict (Aborted). A
// Delete returns no version, so it is not waited for. Each worker has one,
// and takes what it recorded when a reconcile returns (no allocation per
// reconcile). A write that a goroutine left behind by a reconcile makes
// later is recorded with the worker's next reconcile, which then waits for
// it too: a longer wait, never a shorter one.
type writeRecorder struct {
	pbresource.ResourceServiceClient
	cache *cache.Cache

	mu       sync.Mutex
	conflict bool
	types    []writtenType // in inline, unless more types were written
	inline   [2]writtenType
	// lastType and lastApplied spare the cache's look-up for the type
	// written last, which is most often the one written next.
	lastType    *pbresource.Type
	lastApplied *cache.Applied

	// taken is what take returned last; only the worker touches it.
	taken []writtenType
}

func (r *writeRecorder) init(client pbresource.ResourceServiceClient, c *cache.Cache) {
	r.ResourceServiceClient, r.cache = client, c
	r.types = r.inline[:0]
}

func (r *writeRecorder) Write(ctx context.Context, in *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	rsp, err := r.ResourceServiceClient.Write(ctx, in, opts...)
	r.note(in.GetResource().GetId().GetType(), rsp.GetResource().GetVersion(), err)
	return rsp, err
}

func (r *writeRecorder) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	rsp, err := r.ResourceServiceClient.WriteStatus(ctx, in, opts...)
	r.note(in.GetId().GetType(), rsp.GetResource().GetVersion(), err)
	return rsp, err
}

func (r *writeRecorder) Delete(ctx context.Context, in *pbresource.DeleteRequest, opts ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	rsp, err := r.ResourceServiceClient.Delete(ctx, in, opts...)
	r.note(nil, "", err)
	return rsp, err
}

// note records a write's outcome: a conflict, or the version it wrote of
// typ. A version that is not a number (a server whose versions are not
// Loom's or Consul's) cannot be waited for, nor can a type the cache does
// not hold.
func (r *writeRecorder) note(typ *pbresource.Type, version string, err error) {
	var v uint64
	if err == nil {
		var perr error
		if v, perr = strconv.ParseUint(version, 10, 64); perr != nil {
			return
		}
	} else if status.Code(err) != codes.Aborted {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.conflict = true
		return
	}
	for i := range r.types {
		if t := &r.types[i]; resource.EqualUnversionedType(t.typ, typ) {
			t.version = max(t.version, v)
			return
		}
	}
	if applied := r.appliedOf(typ); applied != nil {
		r.types = append(r.types, writtenType{typ: typ, applied: applied, version: v})
	}
}

// appliedOf returns how far the cache has applied typ, or nil if it does
// not hold typ. The caller holds mu.
func (r *writeRecorder) appliedOf(typ *pbresource.Type) *cache.Applied {
	if r.lastApplied != nil && resource.EqualUnversionedType(r.lastType, typ) {
		return r.lastApplied
	}
	applied, err := r.cache.Applied(typ)
	if err != nil {
		return nil
	}
	r.lastType, r.lastApplied = typ, applied
	return applied
}

// take returns what was written since the last take, valid until the next
// one, and starts recording afresh.
func (r *writeRecorder) take() []writtenType {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.taken = append(r.taken[:0], r.types...)
	clear(r.types)
	r.types, r.conflict = r.inline[:0], false
	return r.taken
}

// conflicted reports whether err, a reconcile's error, is a write conflict:
// a write since the last take was refused with Aborted (a compare-and-swap on
// a version the store had moved past), and the reconcile failed with it.
func (r *writeRecorder) conflicted(err error) bool {
	if status.Code(err) != codes.Aborted {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conflict
}
