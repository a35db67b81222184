// Package upsert is a read-modify-write helper for resources, in the
// spirit of controller-runtime's controllerutil.CreateOrUpdate.
//
// A Write replaces a resource's data, metadata and owner with what it
// carries (only the status is carried over when omitted). So a Write built
// from scratch, without the stored metadata, silently removes the
// finalizers a controller added. CreateOrUpdate starts from the stored copy
// instead: the caller changes only what it owns, and everything else
// (finalizers and other metadata, owner, statuses) is kept.
//
// CreateOrUpdateOwned does the same for a resource owned by another: it
// sets the owner on creation, and refuses (AlreadyOwnedError) to take over
// a resource whose owner is another, or an earlier lifetime of the same
// name, which a re-created owner would otherwise mistake for its own.
//
// It needs only a pbresource.ResourceServiceClient, so reconcilers
// (rt.Client), initializers and tools can all use it, against Loom's
// service or Consul's.
package upsert

import (
	"context"
	"fmt"
	"time"

	"github.com/loomrt/loom/internal/retry"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Result says what CreateOrUpdate did.
type Result int

const (
	// Unchanged: the resource already was as the mutate function wanted;
	// nothing was written, or the service found the write changed nothing.
	Unchanged Result = iota
	// Created: the resource did not exist and was created.
	Created
	// Updated: the resource existed and was changed.
	Updated
)

// String returns "unchanged", "created" or "updated".
func (r Result) String() string {
	switch r {
	case Unchanged:
		return "unchanged"
	case Created:
		return "created"
	case Updated:
		return "updated"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// MutateFunc brings res to the state the caller wants. res is the caller's
// own copy of the stored resource, or, when none exists, a new resource
// with only its ID set (and its Owner, for CreateOrUpdateOwned). Change only what you own (typically Data, perhaps
// one finalizer or metadata key); leave the ID alone, and the status to
// WriteStatus. It may be called more than once, on a fresh copy each time,
// when a concurrent write gets in between; an error it returns ends
// CreateOrUpdate with that error.
type MutateFunc func(res *pbresource.Resource) error

// Option tunes CreateOrUpdate and CreateOrUpdateOwned.
type Option func(*options)

type options struct {
	attempts  int
	base, max time.Duration
	replace   bool // ReplaceStale
}

// WithAttempts sets how many read-mutate-write rounds CreateOrUpdate makes
// before it returns the conflict (Aborted) to the caller (default 5).
func WithAttempts(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.attempts = n
		}
	}
}

// WithBackoff sets the bounds of the exponential wait between rounds after
// a conflict (default 5 ms and 100 ms).
func WithBackoff(base, max time.Duration) Option {
	return func(o *options) {
		if base > 0 && max >= base {
			o.base, o.max = base, max
		}
	}
}

// CreateOrUpdate reads the resource id names (by type, tenancy and name;
// a Uid in id is ignored), lets mutate change a copy of it, and writes the
// copy back with a compare-and-swap on the version read. If the resource
// does not exist, mutate gets a new resource with just the ID and the
// result is created. A conflict (Aborted: a concurrent write, or a
// deletion, got in between) starts a new round from a fresh read, up to
// WithAttempts rounds with backoff between them.
//
// When mutate changes nothing, nothing is written and the result is
// Unchanged; so is a write the service finds to be a no-op (same version).
// It returns the resource as stored afterwards; on error, nil and
// Unchanged.
//
// Creation cannot be conditional on the wire: a resource created by
// someone else between CreateOrUpdate's read (a linearizable one, when it
// finds nothing) and its write is overwritten by the write.
//
// A resource marked for deletion accepts only writes that remove
// finalizers; the service refuses any other change (the error is returned
// as it is). A status changed by mutate is refused by the service too: use
// WriteStatus.
func CreateOrUpdate(ctx context.Context, client pbresource.ResourceServiceClient, id *pbresource.ID, mutate MutateFunc, opts ...Option) (*pbresource.Resource, Result, error) {
	return run(ctx, round{client: client, id: id, mutate: mutate}, opts)
}

// round is what one read-mutate-write round needs.
type round struct {
	client  pbresource.ResourceServiceClient
	id      *pbresource.ID
	owner   *pbresource.ID // CreateOrUpdateOwned's owner, nil for CreateOrUpdate
	mutate  MutateFunc
	replace bool // ReplaceStale was given
}

// run makes rounds until one ends with something else than a conflict, or
// the attempts run out.
func run(ctx context.Context, r round, opts []Option) (*pbresource.Resource, Result, error) {
	o := options{attempts: 5, base: 5 * time.Millisecond, max: 100 * time.Millisecond}
	for _, opt := range opts {
		opt(&o)
	}
	r.replace = o.replace
	b := retry.NewBackOff(o.base, o.max)
	for attempt := 1; ; attempt++ {
		res, result, err := r.once(ctx)
		if status.Code(err) != codes.Aborted || attempt >= o.attempts {
			return res, result, err
		}
		t := time.NewTimer(b.NextBackOff())
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, Unchanged, ctx.Err()
		case <-t.C:
		}
	}
}

// once makes one read-mutate-write round.
func (r round) once(ctx context.Context) (*pbresource.Resource, Result, error) {
	name := resource.CloneID(r.id)
	name.Uid = ""
	stored, err := read(ctx, r.client, name)
	if err != nil {
		return nil, Unchanged, err
	}
	if stored != nil && r.owner != nil {
		if stored, err = r.checkOwner(ctx, stored); err != nil {
			return nil, Unchanged, err
		}
	}
	var res *pbresource.Resource
	switch {
	case stored != nil:
		res = resource.Clone(stored)
	case r.owner != nil:
		res = &pbresource.Resource{Id: name, Owner: resource.CloneID(r.owner)}
	default:
		res = &pbresource.Resource{Id: name}
	}
	want := resource.CloneID(res.Id)
	var wantOwner *pbresource.ID
	if r.owner != nil {
		wantOwner = resource.CloneID(res.Owner)
	}
	if err := r.mutate(res); err != nil {
		return nil, Unchanged, err
	}
	if !sameName(res.Id, want) {
		return nil, Unchanged, fmt.Errorf("upsert: the mutate function changed the resource's ID from %s to %s",
			resource.IDString(want), resource.IDString(res.Id))
	}
	if r.owner != nil && !resource.EqualID(res.Owner, wantOwner) {
		return nil, Unchanged, fmt.Errorf("upsert: the mutate function changed the owner of %s from %s to %s; CreateOrUpdateOwned sets it",
			resource.IDString(want), resource.IDString(wantOwner), resource.IDString(res.Owner))
	}
	if stored != nil && proto.Equal(res, stored) {
		return stored, Unchanged, nil
	}
	if stored != nil {
		res.Version = stored.Version
	} else {
		res.Version = ""
	}
	rsp, err := r.client.Write(ctx, &pbresource.WriteRequest{Resource: res})
	if err != nil {
		return nil, Unchanged, err
	}
	switch {
	case stored == nil:
		return rsp.Resource, Created, nil
	case rsp.Resource.GetVersion() == stored.Version:
		return rsp.Resource, Unchanged, nil
	}
	return rsp.Resource, Updated, nil
}

// read returns the stored resource, or nil when there is none. A NotFound
// is confirmed by a linearizable read, so a lagging replica cannot make
// CreateOrUpdate overwrite a resource it did not see.
func read(ctx context.Context, client pbresource.ResourceServiceClient, id *pbresource.ID) (*pbresource.Resource, error) {
	rsp, err := client.Read(ctx, &pbresource.ReadRequest{Id: id})
	if status.Code(err) == codes.NotFound {
		consistent := metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
		rsp, err = client.Read(consistent, &pbresource.ReadRequest{Id: id})
	}
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rsp.Resource, nil
}

// sameName reports whether a and b name the same resource, Uid aside.
func sameName(a, b *pbresource.ID) bool {
	return resource.EqualType(a.GetType(), b.GetType()) &&
		resource.EqualTenancy(a.GetTenancy(), b.GetTenancy()) &&
		a.GetName() == b.GetName()
}
