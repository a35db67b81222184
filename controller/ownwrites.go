package controller

// Read-your-own-writes (DESIGN.md). Versions are store-wide and grow with
// every write, so once a reconcile's writes have returned versions, "the
// cache has caught up with them" is one comparison per type written: the
// version up to which the cache has applied the type (cache.Applied, fed
// by the watches) against the newest version the reconcile wrote of
// it. Until then the key stays in progress in the queue: the worker does
// not hand it back (Done) but goes on with other keys, and the queue's
// contract does the rest (no worker takes the key; a change that queues it
// meanwhile reconciles it once it is handed back). A bound keeps a cache
// that never catches up from holding a key for good.

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller/queue"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/prometheus/client_golang/prometheus"
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

// ownWrites holds back the keys of one run of a controller until the cache
// has applied what their last reconcile wrote, or bound has passed.
//
// The watch that ends a hold's waits (hold.Applied) touches only the hold
// and the queue: it hands the key back and marks the hold released. The
// list of holds, which the timeouts need, is kept by the workers (which add
// holds at its end and drop released ones from its start) and by the
// timer, under mu, so the watch's goroutine and the workers share no lock
// but the queue's.
type ownWrites struct {
	q        *workQueue
	bound    time.Duration // 0: off
	timeouts prometheus.Counter
	logger   hclog.Logger

	mu sync.Mutex
	// first and last end the list of holds, in the order they began; all
	// have the same bound, so that is about the order of their deadlines
	// (workers that end reconciles at once may link theirs a little out of
	// order, which delays a timeout by as much). Released holds stay in it
	// until they reach its start.
	first, last *hold
	timer       *time.Timer // armed for the first waiting hold's deadline
	armed       bool
	stopped     bool
	// free keeps released holds for new ones: most reconciles write, so
	// most need one.
	free []*hold
}

// The states of a hold. It starts waiting; whoever moves it on hands the
// key back.
const (
	holdWaiting int32 = iota
	holdReleased
	holdTimedOut
	holdStopped
)

// hold is one key held back until the cache has what its reconcile wrote.
type hold struct {
	o      *ownWrites
	inline [2]cache.AppliedWait
	// pending counts the waits not over, plus one while the hold is being
	// set up; the one that brings it to zero releases the hold.
	pending  atomic.Int32
	state    atomic.Int32
	item     queue.Item[reconcile.RequestKey, reconcile.Request]
	end      time.Time // when the reconcile ended, for the queue's metrics
	deadline time.Time
	waits    []cache.AppliedWait // in inline, unless more types were written
	next     *hold               // in the list; guarded by o.mu
}

// handBack hands item back to the queue after its reconcile, which ended at
// end and wrote written: at once, or, when the reconcile wrote versions the
// cache has not applied yet, once it has or the bound has passed. It does
// not keep written.
func (o *ownWrites) handBack(item queue.Item[reconcile.RequestKey, reconcile.Request], end time.Time, written []writtenType) {
	if o.bound <= 0 || applied(written) {
		o.q.DoneAt(item, end)
		return
	}
	o.mu.Lock()
	if o.stopped {
		o.mu.Unlock()
		o.q.DoneAt(item, end)
		return
	}
	o.dropReleased()
	h := o.newHold()
	h.item, h.end, h.deadline = item, end, end.Add(o.bound)
	if len(written) > len(h.inline) {
		h.waits = make([]cache.AppliedWait, 0, len(written))
	}
	h.pending.Store(1) // until the waits are set up
	for _, t := range written {
		h.waits = h.waits[:len(h.waits)+1]
		// Counted before it starts: it may end at once.
		h.pending.Add(1)
		if !t.applied.Wait(&h.waits[len(h.waits)-1], t.version, h) {
			h.pending.Add(-1)
		}
	}
	o.link(h)
	o.mu.Unlock()
	h.Applied(nil) // the set-up is over: release it if its waits are
}

// applied reports whether the cache holds every version in written: the
// common case of a cache that is quick, checked without a lock.
func applied(written []writtenType) bool {
	for _, t := range written {
		if t.applied.Version() < t.version {
			return false
		}
	}
	return true
}

// Applied is told by the cache that one of h's waits is over; the last one
// releases the hold and hands the key back. (A hold that timed out or was
// stopped first is left alone.)
func (h *hold) Applied(*cache.AppliedWait) {
	if h.pending.Add(-1) != 0 {
		return
	}
	// Read before the release: once released, a worker may reuse h.
	item, end := h.item, h.end
	if h.state.CompareAndSwap(holdWaiting, holdReleased) {
		h.o.q.DoneAt(item, end)
	}
}

// cancel stops h's waits, and reports whether none of them is being told
// it is over meanwhile, so that h may be reused.
func (h *hold) cancel() bool {
	idle := true
	for i := range h.waits {
		if !h.waits[i].Cancel() {
			idle = false
		}
	}
	return idle
}

// newHold returns a hold from the free list, or a new one; the caller
// holds o.mu.
func (o *ownWrites) newHold() *hold {
	var h *hold
	if n := len(o.free); n > 0 {
		h, o.free = o.free[n-1], o.free[:n-1]
		h.state.Store(holdWaiting)
	} else {
		h = &hold{o: o}
	}
	h.waits = h.inline[:0]
	return h
}

// maxFreeHolds bounds the free list: a burst of holds is not kept for good.
const maxFreeHolds = 1024

// link puts h at the end of the list; the caller holds o.mu.
func (o *ownWrites) link(h *hold) {
	if o.last != nil {
		o.last.next = h
	} else {
		o.first = h
	}
	o.last = h
	o.arm(h.end)
}

// unlinkFirst takes the first hold out of the list; the caller holds o.mu.
func (o *ownWrites) unlinkFirst() *hold {
	h := o.first
	o.first = h.next
	if o.first == nil {
		o.last = nil
	}
	h.next = nil
	return h
}

// dropReleased takes the released holds at the start of the list out of it
// and keeps them for reuse: once released, nothing refers to a hold (its
// waits are over, and the watch that released it has read what it needed).
// The caller holds o.mu.
func (o *ownWrites) dropReleased() {
	for o.first != nil && o.first.state.Load() == holdReleased {
		h := o.unlinkFirst()
		if len(o.free) < maxFreeHolds {
			h.item, h.waits = queue.Item[reconcile.RequestKey, reconcile.Request]{}, nil
			o.free = append(o.free, h)
		}
	}
}

// arm makes the timer fire at the first hold's deadline, unless it is
// armed already (for an earlier one: expire re-arms it). The caller holds
// o.mu.
func (o *ownWrites) arm(now time.Time) {
	if o.armed || o.stopped || o.first == nil {
		return
	}
	o.armed = true
	wait := o.first.deadline.Sub(now)
	if o.timer == nil {
		o.timer = time.AfterFunc(wait, o.expire)
		return
	}
	o.timer.Reset(wait)
}

// expire hands back the keys whose bound has passed, counting each.
func (o *ownWrites) expire() {
	o.mu.Lock()
	o.armed = false
	now := time.Now()
	var due []*hold
	for o.first != nil {
		o.dropReleased()
		h := o.first
		if h == nil || h.deadline.After(now) {
			break
		}
		o.unlinkFirst()
		if h.state.CompareAndSwap(holdWaiting, holdTimedOut) {
			due = append(due, h)
		}
	}
	o.arm(now)
	o.mu.Unlock()
	for _, h := range due {
		h.cancel() // h is not reused: a wait of it may be ending meanwhile
		o.timeouts.Inc()
		o.logger.Debug("the cache has not caught up with what the last reconcile wrote; reconciling again anyway",
			"request", h.item.Key.String(), "waited", o.bound)
		o.q.DoneAt(h.item, h.end)
	}
}

// stop hands back every key still held, once the workers have stopped.
func (o *ownWrites) stop() {
	o.mu.Lock()
	o.stopped = true
	if o.timer != nil {
		o.timer.Stop()
	}
	var held []*hold
	for o.first != nil {
		if h := o.unlinkFirst(); h.state.CompareAndSwap(holdWaiting, holdStopped) {
			held = append(held, h)
		}
	}
	o.free = nil
	o.mu.Unlock()
	for _, h := range held {
		h.cancel()
		o.q.DoneAt(h.item, h.end)
	}
}
