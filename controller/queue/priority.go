package queue

import "time"

// Priority ranks the keys waiting in a Queue: a Normal key is handed out
// before a Low one, until the Low one has waited the queue's aging bound
// (Options.AgingBound); from then on the two take turns. The zero value is
// Normal.
type Priority int8

const (
	// Low is for work nobody is waiting for: the resources queued when a
	// controller starts or its cache is filled again, periodic resyncs and
	// retries after a backoff.
	Low Priority = -1
	// Normal is for live changes, and the default of Add.
	Normal Priority = 0
)

// String returns "low" or "normal", the value of the priority label of
// the depth metric.
func (p Priority) String() string {
	if p < Normal {
		return "low"
	}
	return "normal"
}

// DefaultAgingBound is how long a Low key waits, at most, before it takes
// turns with Normal keys (see Options.AgingBound).
const DefaultAgingBound = 5 * time.Second

// ring is a FIFO of T as a ring buffer: head indexes the oldest entry, n
// counts the entries.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		grown := make([]T, max(16, 2*len(r.buf)))
		for i := 0; i < r.n; i++ {
			grown[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf = grown
		r.head = 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

func (r *ring[T]) peek() T { return r.buf[r.head] }

func (r *ring[T]) pop() T {
	v := r.buf[r.head]
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return v
}

// reset empties the ring, keeping its buffer; it costs one step per
// entry, not per slot of the buffer.
func (r *ring[T]) reset() {
	for r.n > 0 {
		r.pop()
	}
	r.head = 0
}

// lowEntry is a Low key in Queue.low. An entry goes stale when its item is
// raised to Normal (or recycled) while it waits: seq no longer matches.
type lowEntry[K comparable, V any] struct {
	it  *item[K, V]
	gen uint64
	seq uint32
}

func (e lowEntry[K, V]) live() bool {
	return e.it.gen == e.gen && e.it.lowSeq == e.seq && e.it.queued && e.it.prio == Low
}

// pushLow queues it at Low; the caller holds q.mu.
func (q *Queue[K, V]) pushLow(it *item[K, V]) {
	it.readyAt = q.clock()
	it.lowSeq++
	q.low.push(lowEntry[K, V]{it: it, gen: it.gen, seq: it.lowSeq})
	q.nLow++
}

// raise moves a Low key waiting for a worker to Normal, unless it has
// waited the aging bound already (it takes turns with Normal keys then,
// and would wait behind them at the end of theirs). The stale entry stays
// in q.low until it comes to the front.
func (q *Queue[K, V]) raise(it *item[K, V]) {
	if q.clock()-it.readyAt >= q.aging {
		return
	}
	it.prio = Normal
	q.nLow--
	if q.nLow == 0 {
		q.low.reset()
	}
	q.normal.push(it)
	q.setDepth(Normal)
	q.setDepth(Low)
}

// lowHead returns the oldest live Low entry, dropping stale ones before
// it; the caller made sure that nLow > 0.
func (q *Queue[K, V]) lowHead() lowEntry[K, V] {
	for {
		if e := q.low.peek(); e.live() {
			return e
		}
		q.low.pop()
	}
}

// pop takes the next key for a worker: a Normal one, unless there is none
// or the oldest Low key has waited the aging bound and it is Low's turn.
func (q *Queue[K, V]) pop() *item[K, V] {
	var it *item[K, V]
	switch {
	case q.nLow == 0:
		it = q.normal.pop()
		q.tookLow = false
	case q.normal.n == 0 || q.lowTurn():
		it = q.lowHead().it
		q.low.pop()
		if q.nLow--; q.nLow == 0 {
			q.low.reset()
		}
		q.tookLow = true
	default:
		it = q.normal.pop()
		q.tookLow = false
	}
	q.n--
	it.queued = false
	return it
}

// lowTurn reports, when keys of both priorities wait, whether the next
// one is Low: while the oldest Low key has waited the aging bound, when
// the last one handed out was not Low; else never.
func (q *Queue[K, V]) lowTurn() bool {
	return !q.tookLow && q.clock()-q.lowHead().it.readyAt >= q.aging
}

// setDepth reports the depth of priority p.
func (q *Queue[K, V]) setDepth(p Priority) {
	switch {
	case q.metrics == nil:
	case p == Normal:
		q.metrics.Depth.Set(float64(q.normal.n))
	case q.metrics.LowDepth != nil:
		q.metrics.LowDepth.Set(float64(q.nLow))
	}
}
