package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/controller"
	pbleasev1 "github.com/loomrt/loom/proto/pblease/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Elector campaigns for one lease resource and, once it holds it, renews it.
// It is a controller.Lease: give it to controller.WithLease.
type Elector struct {
	client   pbresource.ResourceServiceClient
	id       *pbresource.ID
	identity string
	cfg      config
	ran      atomic.Bool

	mu         sync.Mutex
	held       bool
	validUntil time.Time // held means held until then (monotonic clock)
	changed    chan struct{}
	expiry     *time.Timer
	holder     string // the holder of the last record seen

	hist *history // what the watch of the lease has seen

	// Only Run's goroutine uses these.
	observed   *pbresource.Resource // the last lease resource read or written
	record     *pbleasev1.Lease     // observed's data
	observedAt time.Time            // when observed's Version was first seen here
}

var _ controller.Lease = (*Elector)(nil)

// New returns an Elector that campaigns, as identity, for the lease
// resource id (its Type may be left nil; its Tenancy nil means the default
// partition and namespace). identity must differ between replicas: a
// replica takes a lease that names it as holder as its own. Nothing is
// sent before Run.
func New(client pbresource.ResourceServiceClient, id *pbresource.ID, identity string, opts ...Option) (*Elector, error) {
	if client == nil {
		return nil, errors.New("leaderelection: a ResourceService client is required")
	}
	if id.GetName() == "" {
		return nil, errors.New("leaderelection: the lease resource needs a name")
	}
	if t := id.GetType(); t != nil && !proto.Equal(t, LeaseType) {
		return nil, fmt.Errorf("leaderelection: the lease resource's type must be %s, not %s",
			resource.TypeString(LeaseType), resource.Quote(resource.TypeString(t)))
	}
	if identity == "" {
		return nil, errors.New("leaderelection: the holder identity must not be empty")
	}
	if len(identity) > maxIdentityLen {
		return nil, fmt.Errorf("leaderelection: the holder identity is longer than %d bytes", maxIdentityLen)
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Elector{
		client:   client,
		id:       &pbresource.ID{Type: LeaseType, Tenancy: proto.CloneOf(id.GetTenancy()), Name: id.GetName()},
		identity: identity,
		cfg:      cfg,
		changed:  make(chan struct{}),
		hist:     newHistory(),
	}, nil
}

// Held reports whether this replica holds the lease now. It reads the clock
// itself: it turns false at the renew deadline even if nothing else has run.
func (e *Elector) Held() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.held && time.Now().Before(e.validUntil)
}

// Changed returns a channel closed the next time Held may have changed.
func (e *Elector) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// Holder returns the holder identity of the lease record this replica saw
// last ("" when none, or before the first read).
func (e *Elector) Holder() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.holder
}

// Run campaigns for the lease and renews it while held, until ctx ends;
// then, if it holds the lease, it gives it up (Held turns false first) and
// releases it, so another replica takes it at once. It returns nil when ctx
// ends, and an error when the server refuses the lease resource itself (an
// unregistered type: Consul's case). Failed calls are otherwise logged and
// retried. An Elector runs once.
//
// Stop the Manager before Run's ctx ends (see the package example): the
// release must come after the singleton controllers have stopped.
func (e *Elector) Run(ctx context.Context) error {
	if e.ran.Swap(true) {
		return errors.New("leaderelection: an Elector runs once")
	}
	defer e.release()
	released := make(chan struct{}, 1)
	watchCtx, stopWatch := context.WithCancel(ctx)
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		e.watch(watchCtx, released)
	}()
	// Deferred after release, so it runs first: the watch has ended when
	// the lease is released.
	defer func() {
		stopWatch()
		<-watchDone
	}()
	for {
		var err error
		if e.Held() {
			err = e.renew(ctx)
		} else {
			err = e.tryAcquire(ctx)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		wait := e.cfg.retryPeriod
		var nudge <-chan struct{}
		if !e.Held() {
			// Spread the others' attempts (client-go's jitter factor),
			// but try at once when the lease is released.
			wait += time.Duration(rand.Int64N(int64(wait)/5 + 1))
			nudge = released
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-nudge:
			t.Stop()
		case <-t.C:
		}
	}
}

// watch follows the lease: it keeps e.hist (see history), and signals
// released (without blocking) whenever the lease is seen released, so that
// a replica waiting for it tries at once instead of at its next attempt.
// When the stream fails it is opened again a retry period later; the
// periodic attempts go on meanwhile.
func (e *Elector) watch(ctx context.Context, released chan<- struct{}) {
	for {
		e.hist.restart()
		stream, err := e.client.WatchList(ctx, &pbresource.WatchListRequest{
			Type: LeaseType, Tenancy: e.id.Tenancy, NamePrefix: e.id.Name,
		})
		for err == nil {
			var ev *pbresource.WatchEvent
			if ev, err = stream.Recv(); err == nil {
				e.note(ev, released)
			}
		}
		e.hist.restart()
		if ctx.Err() == nil {
			e.cfg.logger.Debug("watch of the leader lease ended; opening it again", "lease", e.name(), "error", err)
		}
		t := time.NewTimer(e.cfg.retryPeriod)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// note records one event of the lease's watch.
func (e *Elector) note(ev *pbresource.WatchEvent, released chan<- struct{}) {
	switch {
	case ev.GetEndOfSnapshot() != nil:
		e.hist.endSnapshot()
	case ev.GetDelete() != nil:
		d := ev.GetDelete()
		if d.GetResource().GetId().GetName() == e.id.Name {
			version := d.GetVersion()
			if version == "" {
				version = d.GetResource().GetVersion()
			}
			e.hist.remove(version)
		}
	case ev.GetUpsert() != nil:
		res := ev.GetUpsert().GetResource()
		if res.GetId().GetName() != e.id.Name {
			return
		}
		rec := decode(res)
		e.hist.upsert(res, rec.GetHolderIdentity())
		if rec.GetHolderIdentity() == "" && rec.GetLeaseDuration().AsDuration() == 0 {
			select {
			case released <- struct{}{}:
			default:
			}
		}
	}
}

// tryAcquire reads the lease and takes it if it is free, creating it if
// there is none. It returns only errors that end Run.
func (e *Elector) tryAcquire(ctx context.Context) error {
	// A call that hangs must not stall the campaign; one that succeeds this
	// late would give a lease already past its renew deadline anyway.
	ctx, cancel := context.WithTimeout(ctx, e.cfg.renewDeadline)
	defer cancel()
	cur, err := e.read(ctx)
	if err != nil {
		return e.failed("reading", err)
	}
	if cur == nil {
		if cur, err = e.create(ctx); cur == nil || err != nil {
			return err
		}
	}
	rec := decode(cur)
	e.observe(cur, rec)
	if !e.free(rec, cur.Version, time.Now()) {
		return nil
	}
	now := timestamppb.Now()
	next := &pbleasev1.Lease{
		HolderIdentity:   e.identity,
		LeaseDuration:    durationpb.New(e.cfg.leaseDuration),
		AcquireTime:      now,
		RenewTime:        now,
		LeaseTransitions: rec.GetLeaseTransitions(),
	}
	if rec.GetHolderIdentity() == e.identity {
		next.AcquireTime = rec.GetAcquireTime() // still this replica's term
	} else {
		next.LeaseTransitions++
	}
	sentAt := time.Now()
	out, err := e.write(ctx, next, cur.Version)
	if status.Code(err) == codes.Aborted {
		e.cfg.logger.Debug("another replica changed the lease first", "lease", e.name())
		return nil
	}
	if err != nil {
		return e.failed("taking", err)
	}
	e.observe(out, next)
	e.hold(sentAt)
	e.cfg.logger.Info("leader lease acquired", "lease", e.name(), "identity", e.identity,
		"previous", rec.GetHolderIdentity(), "transitions", next.LeaseTransitions)
	return nil
}

// free reports whether this replica may take the lease rec, stored at
// version, at now.
//
// A lease nobody has held since it was created is free (see history).
// Replicas never compare the times written in the record with their own
// clocks (their clocks may be set differently): a lease that has a holder
// expires one lease duration after this replica first saw its current
// Version. The holder gives it up one renew deadline after it sent its last
// successful renewal, which the server applied before anyone could see it.
// So, as long as the replicas' clocks run at about the same rate, the holder
// has stopped claiming the lease at least lease duration - renew deadline
// before another replica may take it. A holder whose process is paused
// (garbage collection, a stopped VM) does not notice the deadline until it
// runs again; see the package documentation on fencing.
func (e *Elector) free(rec *pbleasev1.Lease, version string, now time.Time) bool {
	d := rec.GetLeaseDuration().AsDuration()
	switch {
	case rec.GetHolderIdentity() == e.identity:
		return true
	case rec.GetHolderIdentity() == "" && d == 0:
		return true // released
	case rec.GetHolderIdentity() == "" && e.hist.fresh(version):
		return true // created, and held by no one since
	}
	return !now.Before(e.observedAt.Add(max(d, e.cfg.leaseDuration)))
}

// create writes the lease resource, held by no one, when a read found
// none, and returns it: nil when the watch shows that another replica has
// created it meanwhile.
//
// A Write without a Version may land on a lease created meanwhile, and
// overwrite it (see history). So create waits for the watch's snapshot
// first, and creates only while the lease is still absent there. Then it
// waits until the watch has delivered its write: only the replica whose
// write created the lease reports it, and one whose write overwrote a
// record that had a holder puts that record back (a compare-and-swap on
// its own write's Version), so the holder keeps the lease. Whether the new
// record may be taken at once is for free to decide, from the history.
func (e *Elector) create(ctx context.Context) (*pbresource.Resource, error) {
	if absent, ok := e.hist.waitPrimed(ctx); ok && !absent {
		return nil, nil
	}
	rec := &pbleasev1.Lease{LeaseDuration: durationpb.New(e.cfg.leaseDuration), RenewTime: timestamppb.Now()}
	out, err := e.write(ctx, rec, "")
	if err != nil {
		return nil, e.failed("creating", err)
	}
	if !e.hist.waitSeen(ctx, out.Version) {
		return out, nil
	}
	if e.hist.createdAt(out.Version) {
		e.cfg.logger.Info("leader lease created", "lease", e.name(), "identity", e.identity)
		return out, nil
	}
	e.cfg.logger.Debug("another replica created the leader lease first", "lease", e.name())
	prev := e.hist.overwritten(out.Version)
	if prev == nil {
		return out, nil
	}
	rsp, err := e.client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id: e.id, Version: out.Version, Data: prev.Data, Metadata: prev.Metadata,
	}})
	if err != nil {
		e.cfg.logger.Debug("could not put back the leader lease record this replica's creation overwrote",
			"lease", e.name(), "error", err)
		return out, nil
	}
	e.cfg.logger.Debug("put back the leader lease record this replica's creation overwrote", "lease", e.name())
	return rsp.GetResource(), nil
}

// renew extends the lease this replica holds, by a compare-and-swap on the
// Version it last wrote.
func (e *Elector) renew(ctx context.Context) error {
	rctx, cancel := context.WithDeadline(ctx, e.deadline())
	defer cancel()
	next := proto.CloneOf(e.record)
	next.LeaseDuration = durationpb.New(e.cfg.leaseDuration)
	next.RenewTime = timestamppb.Now()
	sentAt := time.Now()
	out, err := e.write(rctx, next, e.observed.Version)
	if err == nil {
		e.observe(out, next)
		e.hold(sentAt)
		return nil
	}
	if ctx.Err() != nil {
		return nil
	}
	if status.Code(err) != codes.Aborted {
		// Retried until the deadline, when the lease is given up.
		return e.failed("renewing", err)
	}
	// The lease changed since this replica wrote it: see how.
	cur, rerr := e.read(rctx)
	switch {
	case rerr != nil:
		return e.failed("reading", rerr)
	case cur == nil:
		e.drop("the lease resource was deleted")
	case decode(cur).GetHolderIdentity() == e.identity:
		// An earlier renewal landed though its answer was lost: carry on
		// from the Version it made.
		e.observe(cur, decode(cur))
	default:
		e.observe(cur, decode(cur))
		e.drop("the lease was changed by another replica")
	}
	return nil
}

// release gives the lease up when Run ends: Held turns false, then the
// record is cleared (holder empty, duration zero) so that another replica
// takes it at once.
func (e *Elector) release() {
	e.drop("stopping")
	if e.record.GetHolderIdentity() != e.identity {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.renewDeadline)
	defer cancel()
	next := proto.CloneOf(e.record)
	next.HolderIdentity = ""
	next.LeaseDuration = durationpb.New(0)
	next.RenewTime = timestamppb.Now()
	if _, err := e.write(ctx, next, e.observed.Version); err != nil {
		// Aborted: someone else holds it already. Otherwise the others
		// take it when it expires.
		e.cfg.logger.Warn("could not release the leader lease; the other replicas take it once it expires",
			"lease", e.name(), "error", err)
		return
	}
	e.cfg.logger.Info("leader lease released", "lease", e.name(), "identity", e.identity)
}

// hold records a successful write that made or kept this replica the
// holder: it holds the lease until the renew deadline after sentAt.
func (e *Elector) hold(sentAt time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	wasHeld := e.held && time.Now().Before(e.validUntil)
	e.held, e.validUntil = true, sentAt.Add(e.cfg.renewDeadline)
	if e.expiry != nil {
		e.expiry.Stop()
	}
	e.expiry = time.AfterFunc(time.Until(e.validUntil), e.expire)
	if !wasHeld {
		e.notifyLocked()
	}
}

// expire gives the lease up when the renew deadline has passed.
func (e *Elector) expire() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.held && !time.Now().Before(e.validUntil) {
		e.held = false
		e.notifyLocked()
		e.cfg.logger.Warn("leader lease lost: no renewal succeeded within the renew deadline",
			"lease", e.name(), "renew_deadline", e.cfg.renewDeadline)
	}
}

// drop gives the lease up now, for reason.
func (e *Elector) drop(reason string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.held {
		return
	}
	e.held = false
	if e.expiry != nil {
		e.expiry.Stop()
	}
	e.notifyLocked()
	e.cfg.logger.Info("leader lease given up", "lease", e.name(), "reason", reason)
}

func (e *Elector) notifyLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

func (e *Elector) deadline() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.validUntil
}

// observe notes res (whose data is rec) as the lease's current state.
func (e *Elector) observe(res *pbresource.Resource, rec *pbleasev1.Lease) {
	if e.observed == nil || res.GetVersion() != e.observed.GetVersion() {
		e.observedAt = time.Now()
	}
	e.observed, e.record = res, rec
	e.mu.Lock()
	e.holder = rec.GetHolderIdentity()
	e.mu.Unlock()
}

// read reads the lease resource with a linearizable read; a missing one is
// (nil, nil).
func (e *Elector) read(ctx context.Context) (*pbresource.Resource, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
	rsp, err := e.client.Read(ctx, &pbresource.ReadRequest{Id: e.id})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rsp.GetResource(), nil
}

// write writes rec as the lease's data, on the condition that the stored
// Version is version (none: a blanket write).
func (e *Elector) write(ctx context.Context, rec *pbleasev1.Lease, version string) (*pbresource.Resource, error) {
	data, err := anypb.New(rec)
	if err != nil {
		return nil, err
	}
	rsp, err := e.client.Write(ctx, &pbresource.WriteRequest{
		Resource: &pbresource.Resource{Id: e.id, Version: version, Data: data},
	})
	if err != nil {
		return nil, err
	}
	return rsp.GetResource(), nil
}

// failed logs a failed call and returns an error when retrying cannot help.
func (e *Elector) failed(what string, err error) error {
	switch status.Code(err) {
	case codes.InvalidArgument:
		return fmt.Errorf("leaderelection: %s the lease %s: %w (the server must register %s: Loom hosts do, Consul does not)",
			what, e.name(), err, resource.TypeString(LeaseType))
	case codes.Canceled:
		e.cfg.logger.Debug("leader lease call cancelled", "action", what, "lease", e.name(), "error", err)
	case codes.Unauthenticated, codes.PermissionDenied:
		e.cfg.logger.Error("the server refused the leader lease; the token needs write access to "+resource.TypeString(LeaseType),
			"action", what, "lease", e.name(), "error", err)
	default:
		e.cfg.logger.Warn("leader lease call failed; retrying", "action", what, "lease", e.name(), "error", err)
	}
	return nil
}

func (e *Elector) name() string { return resource.ReferenceString(e.id) }

// decode returns res's lease record; a record that does not decode counts
// as an empty one, which expires like any other.
func decode(res *pbresource.Resource) *pbleasev1.Lease {
	rec := &pbleasev1.Lease{}
	if err := res.GetData().UnmarshalTo(rec); err != nil {
		return &pbleasev1.Lease{}
	}
	return rec
}
