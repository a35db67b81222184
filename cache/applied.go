package cache

import (
	"sync"
	"sync/atomic"

	"github.com/loomrt/loom/proto/pbresource"
)

// The store's versions are global and grow with every write, so how far
// the cache has caught up with a type is one number: the version up to
// which it has applied the type's changes. Whoever feeds the cache records
// it (MarkApplied); a controller that wrote a resource waits for it
// (WaitApplied) before reconciling the same key again, so that it reads
// its own writes.

// AppliedNotifier is told when a wait started with Cache.WaitApplied is
// over.
type AppliedNotifier interface {
	// Applied is called once, with the wait that is over, from the
	// goroutine that called MarkApplied, holding none of the cache's locks.
	// It should be quick: the cache's feed waits for it.
	Applied(w *AppliedWait)
}

// AppliedWait is one wait for the cache to have applied a type up to a
// version (see Cache.WaitApplied). Its zero value is ready for use; it may
// be embedded in a larger struct, to spare an allocation, but must not be
// copied or reused while it waits.
type AppliedWait struct {
	version uint64
	at      int // its index in p.heap plus one; 0 when not waiting
	p       *progress
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

// progress is how far the cache has applied one type's changes, and the
// waits for it to get further, in a heap by version.
type progress struct {
	applied atomic.Uint64
	// waiting is len(heap), for MarkApplied to see without the lock that
	// nobody waits.
	waiting atomic.Int64
	mu      sync.Mutex
	heap    []*AppliedWait
}

// MarkApplied records that the cache holds every change to resources of
// typ up to store version v: the goroutine that feeds the cache calls it
// once it has applied a change, a snapshot or a bookmark at v (the
// controller package's watches do). The version only grows: a v at or below
// the one recorded changes nothing. (So against a store whose versions start
// over, such as a server restarted on an empty store, waits end at once
// until its versions pass the recorded one: a wait never ends late because
// of it, but may end early.) The waits that v ends are told before it
// returns. Without waits it costs a type look-up and two atomic operations.
func (c *Cache) MarkApplied(typ *pbresource.Type, v uint64) error {
	tc, err := c.typeCache(typ)
	if err != nil {
		return err
	}
	tc.applied.mark(v)
	return nil
}

// AppliedVersion returns the version up to which the cache has applied
// typ's changes (see MarkApplied); 0 when none was recorded.
func (c *Cache) AppliedVersion(typ *pbresource.Type) (uint64, error) {
	tc, err := c.typeCache(typ)
	if err != nil {
		return 0, err
	}
	return tc.applied.applied.Load(), nil
}

// WaitApplied makes w wait until the cache has applied typ's changes up to
// version v or later; notify.Applied(w) is then called, once. It returns
// false, and starts no wait, when the cache has applied v already, and an
// error when it does not hold typ. A wait that must end earlier is
// cancelled with w.Cancel.
func (c *Cache) WaitApplied(w *AppliedWait, typ *pbresource.Type, v uint64, notify AppliedNotifier) (bool, error) {
	tc, err := c.typeCache(typ)
	if err != nil {
		return false, err
	}
	return tc.applied.wait(w, v, notify), nil
}

func (p *progress) mark(v uint64) {
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
	for {
		w := p.popApplied()
		if w == nil {
			return
		}
		w.notify.Applied(w)
	}
}

// popApplied takes the first wait that is over out of the heap; nil if
// there is none.
func (p *progress) popApplied() *AppliedWait {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.heap) == 0 || p.heap[0].version > p.applied.Load() {
		return nil
	}
	w := p.heap[0]
	p.remove(w)
	return w
}

func (p *progress) wait(w *AppliedWait, v uint64, notify AppliedNotifier) bool {
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
		// Applied meanwhile, by a MarkApplied that may not have seen this
		// wait (see mark).
		p.remove(w)
		return false
	}
	return true
}

// remove takes w, which waits, out of the heap; the caller holds p.mu.
func (p *progress) remove(w *AppliedWait) {
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

func (p *progress) up(i int) {
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

func (p *progress) down(i int) {
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

func (p *progress) swap(i, j int) {
	h := p.heap
	h[i], h[j] = h[j], h[i]
	h[i].at, h[j].at = i+1, j+1
}
