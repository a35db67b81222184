package cache

import (
	"sync"
	"sync/atomic"

	"github.com/loomrt/loom/proto/pbresource"
)

// The store's versions are global and grow with every write, so how far
// the cache has caught up with a type is one number: the version up to
// which it has applied the type's changes (Applied). Whoever feeds the cache
// records it (Applied.Mark); a controller that wrote a resource waits for
// it (Applied.Wait) before reconciling the same key again, so that it reads
// its own writes.

// AppliedNotifier is told when a wait started with Applied.Wait is over.
type AppliedNotifier interface {
	// Applied is called once, with the wait that is over, from the
	// goroutine that called Applied.Mark, holding none of the cache's
	// locks. It should be quick: the cache's feed waits for it.
	Applied(w *AppliedWait)
}

// AppliedWait is one wait for the cache to have applied a type up to a
// version (see Applied.Wait). Its zero value is ready for use; it may be
// embedded in a larger struct, to spare an allocation, and used for one
// wait after another, but must not be copied.
type AppliedWait struct {
	p      *Applied
	notify AppliedNotifier
	// seq tells this wait's entry in p.waits from those of its earlier
	// waits; waiting says the entry is live. Both are guarded by p.mu.
	seq     uint64
	waiting bool
}

// Cancel stops the wait if it still waits, and reports whether it did. If
// not, the wait is over: its notifier has been called or is being called.
func (w *AppliedWait) Cancel() bool {
	p := w.p
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !w.waiting {
		return false
	}
	w.waiting = false
	p.stale++
	p.waiting.Store(int64(p.size - p.stale))
	p.compact()
	return true
}

// Applied is how far the cache has applied one type's changes, and the
// waits for it to get further. Get it once with Cache.Applied and keep it:
// its methods need no look-up.
//
// The waits are kept in a ring, sorted by version: waits mostly come in
// the order of the versions they wait for (a worker's writes get growing
// versions), so a new one usually goes at the tail, and those that are
// over leave from the head, both in constant time, reading only the ring.
// A cancelled wait leaves its entry behind, stale, until the head reaches
// it or stale entries are the most (then the ring is compacted).
type Applied struct {
	applied atomic.Uint64
	// waiting counts the live waits, for Mark to see without the lock
	// that nobody waits.
	waiting atomic.Int64
	mu      sync.Mutex
	waits   []waitEntry // a ring: size entries from head
	head    int
	size    int
	stale   int // entries of cancelled waits
}

// waitEntry is one wait in the ring: live while w waits with seq.
type waitEntry struct {
	version uint64
	w       *AppliedWait
	seq     uint64
}

func (e *waitEntry) live() bool { return e.w.waiting && e.w.seq == e.seq }

// Applied returns the progress of typ (any GroupVersion of it), or an
// error when the cache does not hold typ.
func (c *Cache) Applied(typ *pbresource.Type) (*Applied, error) {
	tc, err := c.typeCache(typ)
	if err != nil {
		return nil, err
	}
	return &tc.applied, nil
}

// Version returns the version up to which the cache has applied the
// type's changes (see Mark); 0 when none was recorded.
func (p *Applied) Version() uint64 { return p.applied.Load() }

// Mark records that the cache holds every change to resources of the type
// up to store version v: the goroutine that feeds the cache calls it once
// it has applied a change, a snapshot or a bookmark at v (the controller
// package's watches do). The version only grows: a v at or below the one
// recorded changes nothing. (So against a store whose versions start over,
// such as an etcd cluster rebuilt from nothing, waits end at once until its
// versions pass the recorded one: a wait never ends late because of it, but
// may end early. A new in-memory store starts above any earlier one's
// versions.) The waits that v ends are told before Mark returns.
// Without waits it costs two atomic operations.
func (p *Applied) Mark(v uint64) {
	for {
		cur := p.applied.Load()
		if v <= cur {
			return
		}
		if p.applied.CompareAndSwap(cur, v) {
			break
		}
	}
	// A wait that starts meanwhile stores waiting before it reads applied,
	// as this stored applied before it reads waiting: one of the two sees
	// the other.
	if p.waiting.Load() == 0 {
		return
	}
	var over [16]*AppliedWait
	for {
		n, more := p.popApplied(over[:])
		for _, w := range over[:n] {
			w.notify.Applied(w)
		}
		if !more {
			return
		}
	}
}

// popApplied takes up to len(over) waits that are over out of the ring,
// into over, and returns how many, and whether more may be over.
func (p *Applied) popApplied(over []*AppliedWait) (n int, more bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	applied := p.applied.Load()
	for p.size > 0 {
		e := &p.waits[p.head]
		if e.version > applied {
			break
		}
		if n == len(over) {
			more = true
			break
		}
		if e.live() {
			e.w.waiting = false
			over[n] = e.w
			n++
		} else {
			p.stale--
		}
		*e = waitEntry{}
		p.head = (p.head + 1) % len(p.waits)
		p.size--
	}
	p.waiting.Store(int64(p.size - p.stale))
	return n, more
}

// Wait makes w wait until the cache has applied the type's changes up to
// version v or later; notify.Applied(w) is then called, once. It returns
// false, and starts no wait, when the cache has applied v already. A wait
// that must end earlier is cancelled with w.Cancel. w must not be waiting
// already.
func (p *Applied) Wait(w *AppliedWait, v uint64, notify AppliedNotifier) bool {
	if p.applied.Load() >= v {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w.p, w.notify = p, notify
	w.seq++
	w.waiting = true
	at := p.insert(waitEntry{version: v, w: w, seq: w.seq})
	p.waiting.Store(int64(p.size - p.stale))
	if p.applied.Load() >= v {
		// Applied meanwhile, by a Mark that may not have seen this wait
		// (see Mark).
		w.waiting = false
		p.removeAt(at)
		p.waiting.Store(int64(p.size - p.stale))
		return false
	}
	return true
}

// insert puts e into the ring in version order, looking from the tail,
// where it belongs most of the time, and returns its place counted from the
// head. The caller holds p.mu.
func (p *Applied) insert(e waitEntry) int {
	if p.size == len(p.waits) {
		p.grow()
	}
	n := len(p.waits)
	i := p.size
	for i > 0 && p.waits[(p.head+i-1)%n].version > e.version {
		p.waits[(p.head+i)%n] = p.waits[(p.head+i-1)%n]
		i--
	}
	p.waits[(p.head+i)%n] = e
	p.size++
	return i
}

// removeAt takes the entry at place i, counted from the head, out of the
// ring. The caller holds p.mu.
func (p *Applied) removeAt(i int) {
	n := len(p.waits)
	for ; i < p.size-1; i++ {
		p.waits[(p.head+i)%n] = p.waits[(p.head+i+1)%n]
	}
	p.waits[(p.head+p.size-1)%n] = waitEntry{}
	p.size--
}

// grow doubles the ring, keeping its entries in order.
func (p *Applied) grow() {
	grown := make([]waitEntry, max(16, 2*len(p.waits)))
	for i := 0; i < p.size; i++ {
		grown[i] = p.waits[(p.head+i)%len(p.waits)]
	}
	p.waits, p.head = grown, 0
}

// compact drops the stale entries once they are most of the ring (and more
// than a few): cancelled waits whose versions are not reached for long (a
// watch that does not keep up) would otherwise pile up. The caller holds
// p.mu.
func (p *Applied) compact() {
	if p.stale <= 16 || 2*p.stale <= p.size {
		return
	}
	n := len(p.waits)
	kept := 0
	for i := 0; i < p.size; i++ {
		e := p.waits[(p.head+i)%n]
		if e.live() {
			p.waits[(p.head+kept)%n] = e
			kept++
		}
	}
	for i := kept; i < p.size; i++ {
		p.waits[(p.head+i)%n] = waitEntry{}
	}
	p.size, p.stale = kept, 0
}
