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
// version (see Applied.Wait). Its zero value is ready for use; it may
// be embedded in a larger struct, to spare an allocation, but must not be
// copied or reused while it waits.
type AppliedWait struct {
	version uint64
	at      int // its index in p.heap plus one; 0 when not waiting
	p       *Applied
	notify  AppliedNotifier
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
	if w.at == 0 {
		return false
	}
	p.remove(w)
	return true
}

// Applied is how far the cache has applied one type's changes, and the
// waits for it to get further, in a heap by version. Get it once with
// Cache.Applied and keep it: its methods need no look-up.
type Applied struct {
	applied atomic.Uint64
	// waiting is len(heap), for Mark to see without the lock that nobody
	// waits.
	waiting atomic.Int64
	mu      sync.Mutex
	heap    []*AppliedWait
}

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
// such as a server restarted on an empty store, waits end at once until its
// versions pass the recorded one: a wait never ends late because of it, but
// may end early.) The waits that v ends are told before Mark returns.
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
		n := p.popApplied(over[:])
		for _, w := range over[:n] {
			w.notify.Applied(w)
		}
		if n < len(over) {
			return
		}
	}
}

// popApplied takes up to len(over) waits that are over out of the heap,
// into over, and returns how many.
func (p *Applied) popApplied(over []*AppliedWait) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	applied := p.applied.Load()
	n := 0
	for n < len(over) && len(p.heap) > 0 && p.heap[0].version <= applied {
		w := p.heap[0]
		p.remove(w)
		over[n] = w
		n++
	}
	return n
}

// Wait makes w wait until the cache has applied the type's changes up to
// version v or later; notify.Applied(w) is then called, once. It returns
// false, and starts no wait, when the cache has applied v already. A wait
// that must end earlier is cancelled with w.Cancel.
func (p *Applied) Wait(w *AppliedWait, v uint64, notify AppliedNotifier) bool {
	if p.applied.Load() >= v {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w.version, w.p, w.notify = v, p, notify
	w.at = len(p.heap) + 1
	p.heap = append(p.heap, w)
	p.up(len(p.heap) - 1)
	p.waiting.Store(int64(len(p.heap)))
	if p.applied.Load() >= v {
		// Applied meanwhile, by a Mark that may not have seen this
		// wait (see Mark).
		p.remove(w)
		return false
	}
	return true
}

// remove takes w, which waits, out of the heap; the caller holds p.mu.
func (p *Applied) remove(w *AppliedWait) {
	h := p.heap
	i, last := w.at-1, len(h)-1
	if i != last {
		h[i] = h[last]
		h[i].at = i + 1
	}
	h[last] = nil
	p.heap = h[:last]
	w.at = 0
	if i != last {
		p.down(i)
		p.up(i)
	}
	p.waiting.Store(int64(len(p.heap)))
}

func (p *Applied) up(i int) {
	h := p.heap
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].version <= h[i].version {
			return
		}
		p.swap(i, parent)
		i = parent
	}
}

func (p *Applied) down(i int) {
	h := p.heap
	for {
		small := i
		if l := 2*i + 1; l < len(h) && h[l].version < h[small].version {
			small = l
		}
		if r := 2*i + 2; r < len(h) && h[r].version < h[small].version {
			small = r
		}
		if small == i {
			return
		}
		p.swap(i, small)
		i = small
	}
}

func (p *Applied) swap(i, j int) {
	h := p.heap
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i+1, j+1
}
