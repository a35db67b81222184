package queue

// Gate keeps a key from being handed out again after DoneGated until it
// opens: a controller waiting until its cache holds what the key's last
// reconcile wrote uses one. A gate is asked only when the key is added (or
// was added while in progress), so a gate that is open by then costs one
// call to Open.
type Gate interface {
	// Open reports whether the key may be handed out again. The queue calls
	// it with its lock held: it must be quick and must not call the queue.
	Open() bool

	// Wait is called, with the queue's lock held, when Open reported false
	// and the queue has to learn when the gate opens: it starts waiting and
	// reports true, after which the gate calls wake once, from another
	// goroutine, when it opens (or gives up waiting); or it reports false,
	// calling nothing, when the gate has opened meanwhile. It must not call
	// the queue. The queue calls it at most once per DoneGated.
	Wait(wake func()) bool

	// Drop tells the gate that the queue no longer refers to it and will
	// not call it again (a started Wait still wakes the key), so that its
	// owner may reuse it. It is called with the queue's lock held.
	Drop()
}

// passGate reports whether it may go to a worker (or be released, when
// idle) now that its gate is asked: the gate is open, and dropped. If not,
// it waits for the gate to open (see ungate). The caller holds q.mu.
func (q *Queue[K, V]) passGate(it *item[K, V]) bool {
	if it.gateWaiting {
		return false
	}
	if it.gate.Open() {
		q.dropGate(it)
		return true
	}
	gen := it.gen
	if !it.gate.Wait(func() { q.ungate(it, gen) }) {
		q.dropGate(it)
		return true
	}
	it.gateWaiting = true
	return false
}

// ungate is a gate's wake: the key it held back is free to go on, to a
// worker if it was added meanwhile.
func (q *Queue[K, V]) ungate(it *item[K, V], gen uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if it.gen != gen || !it.gateWaiting {
		return // released meanwhile: the item may serve another key
	}
	q.dropGate(it)
	switch {
	case it.processing || it.queued:
	case q.shuttingDown:
		q.release(it)
	case it.dirty:
		q.push(it)
	case it.idle():
		q.park(it)
	}
}

// evict releases an idle item (one parked longest, say), unless its gate
// is closed: then the item, which carries the gate to the key's next add,
// lingers in items until the gate opens (see sweepLingering). Most often
// that add comes first, from the event of the write the gate waits for.
func (q *Queue[K, V]) evict(it *item[K, V]) {
	if it.parked {
		it.parked = false
		q.nParked--
	}
	if it.gate == nil || it.gate.Open() {
		q.release(it)
		return
	}
	it.lingers = true
	q.nLingering++
	q.lingering = append(q.lingering, lingerer[K, V]{it: it, gen: it.gen})
}

// lingerer is an entry of Queue.lingering: it while its gen is gen.
type lingerer[K comparable, V any] struct {
	it  *item[K, V]
	gen uint64
}

// maxLingering bounds the lingering items: past it, the oldest is released
// with its gate still closed, and its key's next reconcile may read a cache
// that lags its last writes (a conflict the controller retries).
const maxLingering = 16 * parkSize

// sweepLingering releases, from the oldest, the lingering items whose gate
// has opened, and drops stale entries, up to the first item whose gate is
// still closed (gates open in about the order of the evictions), or past
// maxLingering. The caller holds q.mu.
func (q *Queue[K, V]) sweepLingering() {
	for q.lingerHead < len(q.lingering) {
		e := q.lingering[q.lingerHead]
		if e.it.gen == e.gen && e.it.lingers {
			if q.nLingering <= maxLingering && !e.it.gate.Open() {
				break
			}
			q.release(e.it)
		}
		q.lingering[q.lingerHead] = lingerer[K, V]{}
		q.lingerHead++
	}
	if q.lingerHead == len(q.lingering) {
		q.lingering, q.lingerHead = q.lingering[:0], 0
	} else if q.lingerHead > len(q.lingering)/2 {
		n := copy(q.lingering, q.lingering[q.lingerHead:])
		clear(q.lingering[n:])
		q.lingering, q.lingerHead = q.lingering[:n], 0
	}
}

// dropGate lets go of it's gate; the caller holds q.mu.
func (q *Queue[K, V]) dropGate(it *item[K, V]) {
	it.gate.Drop()
	it.gate, it.gateWaiting = nil, false
}
