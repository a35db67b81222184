package controller

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller/queue"
	"github.com/loomrt/loom/reconcile"
	"github.com/prometheus/client_golang/prometheus"
)

// ownWrites holds back the keys of one run of a controller until the cache
// has applied what their last reconcile wrote, or bound has passed.
//
// A key goes back to the queue behind a gate at once. Only a gate the queue
// finds closed when its key is added again starts a hold: waits on the
// cache (cache.Applied) that wake the key when they are over. The watch
// that ends a hold's waits (hold.Applied) touches only the hold and the
// queue. The list of holds, which the timeouts need, is kept by the queue's
// callers that start holds (under the queue's lock) and by the timer, under
// mu.
type ownWrites struct {
	q        *workQueue
	bound    time.Duration // 0: off
	timeouts prometheus.Counter
	logger   hclog.Logger

	mu sync.Mutex
	// first and last end the list of holds, in the order they began; all
	// have the same bound, so that is about the order of their deadlines
	// (a hold may start a little after its reconcile ended, which delays
	// nothing: the deadline counts from the end). Released holds stay in
	// it until they reach its start.
	first, last *hold
	timer       *time.Timer // armed for the first waiting hold's deadline
	armed       bool
	stopped     bool
	// free keeps released holds for new ones.
	free []*hold
}

// handBack hands item back to the queue after its reconcile, which ended at
// end and wrote written: open, or, when the reconcile wrote versions the
// cache has not applied yet, behind a gate until it has or the bound has
// passed. It does not keep written.
func (o *ownWrites) handBack(item queue.Item[reconcile.RequestKey, reconcile.Request], end time.Time, written []writtenType, gates *gates) {
	if o.bound <= 0 || applied(written) {
		o.q.DoneAt(item, end)
		return
	}
	g := gates.get()
	g.o, g.key, g.deadline = o, item.Key, end.Add(o.bound)
	g.written = append(g.inline[:0], written...)
	o.q.DoneGated(item, end, g)
}

// gates are the gates of one worker, kept for reuse once the queue drops
// them: a gate lives from a reconcile's end to the key's next add, most
// often a few milliseconds, and the gates a worker made longest ago are
// the first to be dropped. Only the worker touches it.
type gates struct {
	ring [64]*gate
	head int // the oldest gate
	n    int
}

// get returns the worker's oldest gate if the queue has dropped it, else a
// new one, kept for reuse while the ring has room.
func (gs *gates) get() *gate {
	if gs.n > 0 {
		if g := gs.ring[gs.head]; g.dropped.Load() {
			g.dropped.Store(false)
			gs.head = (gs.head + 1) % len(gs.ring)
			gs.ring[(gs.head+gs.n-1)%len(gs.ring)] = g
			return g
		}
	}
	g := new(gate)
	if gs.n < len(gs.ring) {
		gs.ring[(gs.head+gs.n)%len(gs.ring)] = g
		gs.n++
	}
	return g
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

// gate is the queue.Gate of a key whose last reconcile wrote versions the
// cache had not applied when it ended.
type gate struct {
	dropped  atomic.Bool // by the queue: the gate may be reused
	o        *ownWrites
	key      reconcile.RequestKey
	deadline time.Time
	written  []writtenType // in inline, unless more types were written
	inline   [2]writtenType
}

// Open reports whether the cache has applied what the reconcile wrote. The
// bound is kept by the hold a closed gate starts when its key is added
// (see hold), so Open need not read the clock.
func (g *gate) Open() bool { return applied(g.written) }

// Drop marks the gate free for its worker to reuse.
func (g *gate) Drop() { g.dropped.Store(true) }

// Wait starts a hold that wakes the key once the cache has applied what
// the reconcile wrote, or at the deadline.
func (g *gate) Wait(wake func()) bool { return g.o.hold(g, wake) }

// timedOut counts and logs a key let go before the cache caught up.
func (o *ownWrites) timedOut(key reconcile.RequestKey) {
	o.timeouts.Inc()
	o.logger.Debug("the cache has not caught up with what the last reconcile wrote; reconciling again anyway",
		"request", key.String(), "waited", o.bound)
}

// The states of a hold. It starts waiting; whoever moves it on wakes the
// key.
const (
	holdWaiting int32 = iota
	holdReleased
	holdTimedOut
	holdStopped
)

// hold is one gate's wait for the cache to apply what its reconcile wrote.
type hold struct {
	o      *ownWrites
	inline [2]cache.AppliedWait
	// pending counts the waits not over, plus one while the hold is being
	// set up; the one that brings it to zero releases the hold.
	pending  atomic.Int32
	state    atomic.Int32
	wake     func()
	key      reconcile.RequestKey // for the log
	deadline time.Time
	waits    []cache.AppliedWait // in inline, unless more types were written
	next     *hold               // in the list; guarded by o.mu
}

// hold starts waiting for g to open, and reports whether it did (see
// queue.Gate's Wait): false means it is open already.
func (o *ownWrites) hold(g *gate, wake func()) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopped {
		return false
	}
	o.dropReleased()
	h := o.newHold()
	h.wake, h.key, h.deadline = wake, g.key, g.deadline
	if len(g.written) > len(h.inline) {
		h.waits = make([]cache.AppliedWait, 0, len(g.written))
	}
	h.pending.Store(1) // until the waits are set up
	for _, t := range g.written {
		h.waits = h.waits[:len(h.waits)+1]
		// Counted before it starts: it may end at once.
		h.pending.Add(1)
		if !t.applied.Wait(&h.waits[len(h.waits)-1], t.version, h) {
			h.pending.Add(-1)
		}
	}
	if h.pending.Add(-1) == 0 {
		// Every wait ended during the set-up: nobody wakes the key.
		h.state.Store(holdReleased)
		o.recycle(h)
		return false
	}
	o.link(h)
	return true
}

// Applied is told by the cache that one of h's waits is over; the last one
// releases the hold and wakes the key. (A hold that timed out or was
// stopped first is left alone.)
func (h *hold) Applied(*cache.AppliedWait) {
	if h.pending.Add(-1) != 0 {
		return
	}
	// Read before the release: once released, the hold may be reused.
	wake := h.wake
	if h.state.CompareAndSwap(holdWaiting, holdReleased) {
		wake()
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

// recycle keeps a released hold for reuse; the caller holds o.mu.
func (o *ownWrites) recycle(h *hold) {
	if len(o.free) < maxFreeHolds {
		h.wake, h.waits = nil, nil
		o.free = append(o.free, h)
	}
}

// link puts h at the end of the list; the caller holds o.mu.
func (o *ownWrites) link(h *hold) {
	if o.last != nil {
		o.last.next = h
	} else {
		o.first = h
	}
	o.last = h
	o.arm(time.Now())
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
		o.recycle(o.unlinkFirst())
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

// expire wakes the keys whose bound has passed, counting each.
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
		o.timedOut(h.key)
		h.wake()
	}
}

// stop wakes every key still held, once the workers have stopped; later
// gates it is asked about are open.
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
		h.wake()
	}
}
