// Package queue is the work queue behind each controller: it de-duplicates
// keys while they wait, never hands one key to two workers at once, re-queues
// a key that was added while it was being processed, delays keys either
// by a fixed time or by per-key exponential backoff, and hands out Normal
// keys before Low ones, within an aging bound (see Priority).
package queue

import (
	"sync"
	"time"
)

// Queue is a de-duplicating work queue of keys K, each carrying the most
// recently added value V. The zero value is not usable; call New.
//
// The contract with workers: Get hands out a key and marks it in progress;
// the worker must pass the Item to Done when finished. A key added while
// in progress is queued again after Done, never handed to a second worker.
type Queue[K comparable, V any] struct {
	mu   sync.Mutex
	cond sync.Cond

	// items holds every key the queue knows: waiting, in progress or
	// delayed. A key with none of those states is removed. One map look-up
	// per operation keeps the hot path cheap; the rings and the delay heap
	// point straight at the items.
	items map[K]*item[K, V]
	free  []*item[K, V]
	slab  []item[K, V] // fresh items, allocated in chunks
	peak  int          // most keys held at once since items was last made

	// parked holds items that went idle recently, in the order they did,
	// still in items: a key added again soon after its Done (a
	// controller's own status write queues it again) finds its item there
	// instead of deleting it from items and inserting it again, two
	// look-ups in a map too big for the CPU's caches. A slot is live while
	// its item is parked in that slot (an item re-added and idle again is
	// parked in a newer slot, leaving the older one stale); nParked counts
	// the live ones. The oldest live item is released when the ring is
	// full. Parked items hold their key, nothing else (Get dropped the
	// value).
	parked   [parkSize]*item[K, V]
	parkHead int // oldest slot
	parkLen  int // slots in use, live or stale
	nParked  int

	// lingering holds the idle items evicted from parked while their gate
	// was closed (see evict), oldest first, from lingerHead on; entries of
	// items re-added or recycled since are stale. nLingering counts the
	// live ones.
	lingering  []lingerer[K, V]
	lingerHead int
	nLingering int

	// normal and low hold the items waiting for a worker, per priority,
	// each in FIFO order; n counts them both. low may hold stale entries
	// (see lowEntry); nLow counts its live ones. tookLow says the last key
	// handed out was Low (see lowTurn).
	normal  ring[*item[K, V]]
	low     ring[lowEntry[K, V]]
	n       int
	nLow    int
	tookLow bool

	// aging is Options.AgingBound in nanoseconds; clock reads the time on
	// the scale of item.readyAt (tests replace it).
	aging int64
	clock func() int64

	delayed  delayQueue[K, V]
	backoffs backoffs[K]

	metrics      *Metrics
	waiters      int
	shuttingDown bool
}

// item is the state of one key.
type item[K comparable, V any] struct {
	key   K
	value V

	dirty      bool  // must be processed (again)
	queued     bool  // sits in normal or low
	processing bool  // a worker holds it
	parked     bool  // idle, kept in items (see Queue.parked)
	lingers    bool  // idle, kept in items behind a closed gate (see Queue.lingering)
	parkSlot   int32 // its slot in Queue.parked while parked

	prio    Priority // of the pending add, while dirty
	lowSeq  uint32   // bumped each time it is queued at Low (see lowEntry)
	readyAt int64    // when it was queued at Low, on Queue.clock

	addedAt   time.Time // when it became dirty (metrics only)
	startedAt time.Time // when a worker took it (metrics only)

	delayAt   int64 // when a delayed add is due; 0 if none
	delayVal  V
	delayPrio Priority

	// gate, when set, keeps the key from being handed out (see DoneGated);
	// gateWaiting says its Wait is running.
	gate        Gate
	gateWaiting bool

	gen uint64 // bumped when the item is recycled for another key
}

// parkSize is how many idle items a queue keeps at most.
const parkSize = 256

func (it *item[K, V]) idle() bool {
	return !it.dirty && !it.processing && it.delayAt == 0
}

// Options configures a Queue.
type Options struct {
	// BaseDelay and MaxDelay bound the per-key exponential backoff of
	// AddRateLimited: the n-th consecutive failure of a key waits
	// BaseDelay·2ⁿ⁻¹, at most MaxDelay. Zero values mean 5 ms and 1000 s.
	BaseDelay time.Duration
	MaxDelay  time.Duration

	// AgingBound is how long a Low key waits, at most, before it ranks
	// with Normal keys: once the oldest Low key has waited that long, Low
	// and Normal keys take turns until no Low key has waited that long.
	// So under any load of Normal keys a Low key is handed out within
	// AgingBound plus two hand-outs per Low key still waiting ahead of it.
	// Zero means DefaultAgingBound (5 s).
	AgingBound time.Duration

	// Metrics, when non-nil, receives the queue's measurements.
	Metrics *Metrics
}

// Default backoff bounds, as controller-runtime users know them.
const (
	DefaultBaseDelay = 5 * time.Millisecond
	DefaultMaxDelay  = 1000 * time.Second
)

// New returns an empty queue.
func New[K comparable, V any](opts Options) *Queue[K, V] {
	if opts.BaseDelay <= 0 {
		opts.BaseDelay = DefaultBaseDelay
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	if opts.MaxDelay < opts.BaseDelay {
		opts.MaxDelay = opts.BaseDelay
	}
	if opts.AgingBound <= 0 {
		opts.AgingBound = DefaultAgingBound
	}
	epoch := time.Now()
	q := &Queue[K, V]{
		items:   make(map[K]*item[K, V]),
		metrics: opts.Metrics,
		aging:   int64(opts.AgingBound),
		clock:   func() int64 { return int64(time.Since(epoch)) },
	}
	q.cond.L = &q.mu
	q.backoffs.init(opts.BaseDelay, opts.MaxDelay)
	q.delayed.init(q)
	return q
}

// lookup returns key's item, creating it if needed.
func (q *Queue[K, V]) lookup(key K) *item[K, V] {
	if it, ok := q.items[key]; ok {
		if it.parked {
			it.parked = false // the caller makes it dirty or delayed
			q.nParked--
		}
		if it.lingers {
			it.lingers = false
			q.nLingering--
		}
		return it
	}
	var it *item[K, V]
	if n := len(q.free); n > 0 {
		it = q.free[n-1]
		q.free = q.free[:n-1]
	} else {
		if len(q.slab) == 0 {
			q.slab = make([]item[K, V], slabSize)
		}
		it = &q.slab[0]
		q.slab = q.slab[1:]
	}
	it.key = key
	q.items[key] = it
	if len(q.items) > q.peak {
		q.peak = len(q.items)
	}
	return it
}

// slabSize is how many items are allocated at once.
const slabSize = 64

// shrinkAfter is the peak number of keys past which an emptied queue makes
// a new map: a Go map keeps the room it grew to, and a burst of keys (a
// controller's start-up) would otherwise pin it for good.
const shrinkAfter = 4096

// release forgets an item that is no longer waiting, running or delayed.
func (q *Queue[K, V]) release(it *item[K, V]) {
	if it.parked {
		q.nParked--
	}
	if it.lingers {
		q.nLingering--
	}
	delete(q.items, it.key)
	if it.gate != nil {
		it.gate.Drop()
	}
	*it = item[K, V]{gen: it.gen + 1}
	if len(q.free) < 1024 {
		q.free = append(q.free, it)
	}
	if len(q.items) == 0 && q.peak > shrinkAfter {
		q.items = make(map[K]*item[K, V])
		q.peak = 0
	}
}

// park keeps an item that went idle in items for a while (see
// Queue.parked), releasing the oldest parked one if the ring is full.
func (q *Queue[K, V]) park(it *item[K, V]) {
	if it.parked {
		return // parked already, and still idle
	}
	q.sweepLingering()
	if len(q.items)-q.nParked-q.nLingering == 1 && q.peak > shrinkAfter {
		// Nothing else is active after a burst: release everything, so
		// that release makes items anew (see shrinkAfter).
		q.unparkAll()
		q.evict(it)
		return
	}
	if q.parkLen == parkSize {
		slot := q.parkHead
		old := q.parked[slot]
		q.parked[slot] = nil
		q.parkHead = (slot + 1) % parkSize
		q.parkLen--
		if old.parked && old.parkSlot == int32(slot) {
			q.evict(old)
		}
	}
	slot := (q.parkHead + q.parkLen) % parkSize
	it.parked = true
	it.parkSlot = int32(slot)
	q.nParked++
	q.parked[slot] = it
	q.parkLen++
}

// unparkAll evicts every parked item and empties the ring.
func (q *Queue[K, V]) unparkAll() {
	for i := 0; i < q.parkLen; i++ {
		slot := (q.parkHead + i) % parkSize
		if it := q.parked[slot]; it.parked && it.parkSlot == int32(slot) {
			q.evict(it)
		}
	}
	q.parked = [parkSize]*item[K, V]{}
	q.parkHead, q.parkLen = 0, 0
}

// Add queues key with value v now, at Normal priority. If key is already
// waiting, only its value is replaced (and its priority raised to Normal);
// if it is in progress, it is queued again once Done.
func (q *Queue[K, V]) Add(key K, v V) {
	q.mu.Lock()
	if !q.shuttingDown {
		q.markDirty(q.lookup(key), v, time.Time{}, Normal)
	}
	q.mu.Unlock()
}

// AddPriority is Add at priority p. A key already waiting keeps the
// higher of its priority and p: adding it at Normal raises it, at Low
// never lowers it. (Add is AddPriority at Normal, spelt out to keep the
// common call one call deep.)
func (q *Queue[K, V]) AddPriority(key K, v V, p Priority) {
	q.mu.Lock()
	if !q.shuttingDown {
		q.markDirty(q.lookup(key), v, time.Time{}, p)
	}
	q.mu.Unlock()
}

// markDirty queues it with value v at priority p; now may be zero and is
// read lazily, to spare the clock on the de-duplicated path.
func (q *Queue[K, V]) markDirty(it *item[K, V], v V, now time.Time, p Priority) {
	it.value = v
	if it.dirty {
		if p > it.prio {
			if it.queued {
				q.raise(it)
			} else {
				it.prio = p
			}
		}
		return
	}
	it.dirty = true
	it.prio = p
	if q.metrics != nil {
		if now.IsZero() {
			now = time.Now()
		}
		it.addedAt = now
		q.metrics.Adds.Inc()
	}
	if it.processing {
		return // Done moves it to ready.
	}
	if it.gate != nil && !q.passGate(it) {
		return // ungate moves it to ready.
	}
	q.push(it)
}

// push queues it for a worker at its priority.
func (q *Queue[K, V]) push(it *item[K, V]) {
	it.queued = true
	q.n++
	if it.prio == Low {
		q.pushLow(it)
	} else {
		q.normal.push(it)
	}
	q.setDepth(it.prio)
	if q.waiters > 0 {
		q.cond.Signal()
	}
}

// AddAfter queues key at Normal priority once d has passed. A key already
// waiting for a later time is brought forward; one waiting for an earlier
// time keeps it.
func (q *Queue[K, V]) AddAfter(key K, v V, d time.Duration) {
	if d <= 0 {
		q.Add(key, v)
		return
	}
	q.mu.Lock()
	if !q.shuttingDown {
		q.delayed.add(q.lookup(key), v, d, Normal)
	}
	q.mu.Unlock()
}

// AddAfterPriority is AddAfter at priority p. A key already waiting for
// its time keeps the higher of its priority and p.
func (q *Queue[K, V]) AddAfterPriority(key K, v V, d time.Duration, p Priority) {
	if d <= 0 {
		q.AddPriority(key, v, p)
		return
	}
	q.mu.Lock()
	if !q.shuttingDown {
		q.delayed.add(q.lookup(key), v, d, p)
	}
	q.mu.Unlock()
}

// AddRateLimited queues key at Low priority after its backoff: each call
// without an intervening Forget doubles the delay, from BaseDelay up to
// MaxDelay.
func (q *Queue[K, V]) AddRateLimited(key K, v V) {
	q.mu.Lock()
	q.addRateLimited(key, v)
	q.mu.Unlock()
}

// addRateLimited is AddRateLimited with the queue's mutex held.
func (q *Queue[K, V]) addRateLimited(key K, v V) {
	d := q.backoffs.next(key)
	if q.metrics != nil {
		q.metrics.Retries.Inc()
	}
	if !q.shuttingDown {
		q.delayed.add(q.lookup(key), v, d, Low)
	}
}

// AddRetry queues key after a failure that is worth retrying at once: at
// once if it is the key's first failure since it was last forgotten,
// otherwise after its backoff, as AddRateLimited. Either way the failure
// is counted, so a key that keeps failing backs off as usual (from
// BaseDelay). Queued at once, it goes in at priority p (the priority it
// was handed out at, say); after a backoff, at Low. It reports whether the
// key was queued at once.
func (q *Queue[K, V]) AddRetry(key K, v V, p Priority) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.backoffs.failures(key) > 0 {
		q.addRateLimited(key, v)
		return false
	}
	q.backoffs.count(key)
	if !q.shuttingDown {
		q.markDirty(q.lookup(key), v, time.Time{}, p)
	}
	return true
}

// Forget clears key's failure count, so its next AddRateLimited waits only
// BaseDelay. Call it when a key was processed successfully.
func (q *Queue[K, V]) Forget(key K) {
	if q.backoffs.none() {
		return // the common case: no key is failing; spare the lock
	}
	q.mu.Lock()
	q.backoffs.forget(key)
	q.mu.Unlock()
}

// NumRequeues reports how many consecutive times key was rate-limited since
// it was last forgotten.
func (q *Queue[K, V]) NumRequeues(key K) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.backoffs.failures(key)
}

// Item is a key handed to a worker by Get, with the value most recently
// added for it. Pass it back to Done.
type Item[K comparable, V any] struct {
	Key   K
	Value V
	// Started is when Get handed the key out; zero on a queue without
	// metrics, which does not read the clock.
	Started time.Time
	// Priority is the priority the key waited at: a RequeueAfter of its
	// work keeps it.
	Priority Priority
	it       *item[K, V]
	gen      uint64
}

// Get blocks until a key is ready and returns it with its latest value,
// marking it in progress. ok is false once the queue is shut down and
// drained of ready keys.
func (q *Queue[K, V]) Get() (got Item[K, V], ok bool) {
	q.mu.Lock()
	for q.n == 0 && !q.shuttingDown {
		q.waiters++
		q.cond.Wait()
		q.waiters--
	}
	if q.n == 0 {
		q.mu.Unlock()
		return got, false
	}
	it := q.pop()
	it.dirty = false
	it.processing = true
	got = Item[K, V]{Key: it.key, Value: it.value, Priority: it.prio, it: it, gen: it.gen}
	var zero V
	it.value = zero
	if q.metrics != nil {
		now := time.Now()
		it.startedAt = now
		got.Started = now
		q.setDepth(it.prio)
		q.metrics.QueueLatency.Observe(now.Sub(it.addedAt).Seconds())
	}
	q.mu.Unlock()
	return got, true
}

// Done marks the key of got as no longer in progress; if it was added
// meanwhile, it is queued again. Each Item must be passed to Done (or
// DoneAt) once.
func (q *Queue[K, V]) Done(got Item[K, V]) {
	q.DoneAt(got, time.Time{})
}

// DoneAt is Done for a worker that has just read the clock: now, when not
// zero, is taken as the time the work ended, sparing the queue a second
// reading.
func (q *Queue[K, V]) DoneAt(got Item[K, V], now time.Time) {
	q.DoneGated(got, now, nil)
}

// DoneGated is DoneAt that keeps the key from being handed out again until
// gate opens (see Gate); a nil gate is DoneAt's. The key may be added
// meanwhile as usual: it waits, de-duplicated, until the gate opens.
func (q *Queue[K, V]) DoneGated(got Item[K, V], now time.Time, gate Gate) {
	q.mu.Lock()
	it := got.it
	if it != nil && it.gen == got.gen && it.processing {
		it.processing = false
		if q.metrics != nil {
			if now.IsZero() {
				now = time.Now()
			}
			q.metrics.WorkDuration.Observe(now.Sub(it.startedAt).Seconds())
		}
		it.gate = gate
		switch {
		case q.shuttingDown:
			q.release(it)
		case it.dirty:
			if gate == nil || q.passGate(it) {
				q.push(it)
			}
		case it.idle():
			q.park(it)
		}
	}
	q.mu.Unlock()
}

// Len reports how many keys are ready for a worker (not counting delayed or
// in-progress keys).
func (q *Queue[K, V]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.n
}

// Idle reports whether the queue holds nothing: no key ready, in progress
// or delayed.
func (q *Queue[K, V]) Idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) == q.nParked+q.nLingering
}

// ShutDown stops the queue: later adds are dropped, delayed keys are
// discarded, and Get returns ok=false once the ready keys are handed out.
// Keys in progress may still call Done.
func (q *Queue[K, V]) ShutDown() {
	q.mu.Lock()
	q.shuttingDown = true
	q.delayed.stop()
	q.cond.Broadcast()
	q.mu.Unlock()
}

// ShutDownNow is ShutDown that also drops the keys still waiting, so workers
// stop after their current key.
func (q *Queue[K, V]) ShutDownNow() {
	q.mu.Lock()
	for q.n > 0 {
		it := q.pop()
		it.dirty = false
		if !it.processing {
			q.release(it)
		}
	}
	q.mu.Unlock()
	q.ShutDown()
}
