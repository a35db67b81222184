package queue

import (
	"time"
)

// delayQueue holds keys that become ready at a future time. It shares the
// Queue's mutex; one timer, armed for the earliest entry, moves due keys to
// the ready list.
//
// An item keeps its earliest due time in delayAt; bringing it forward pushes
// a new heap entry and leaves the old one stale (skipped when popped because
// its time no longer matches). The heap is a plain slice of values: no
// allocation per entry and no index upkeep on every swap.
type delayQueue[K comparable, V any] struct {
	q       *Queue[K, V]
	heap    []delayEntry[K, V]
	epoch   time.Time // times are nanoseconds since epoch, never 0 once set
	timer   *time.Timer
	armedAt int64 // when the timer fires; 0 when it is not armed
	stopped bool
}

type delayEntry[K comparable, V any] struct {
	at  int64
	gen uint64 // the item's generation when scheduled; items are recycled
	it  *item[K, V]
}

func (d *delayQueue[K, V]) init(q *Queue[K, V]) {
	d.q = q
	d.epoch = time.Now().Add(-time.Nanosecond)
}

func (d *delayQueue[K, V]) now() int64 { return int64(time.Since(d.epoch)) }

// add schedules it after wait at priority p (the higher of p and its
// pending one, if it is scheduled already); the caller holds the queue's
// mutex.
func (d *delayQueue[K, V]) add(it *item[K, V], v V, wait time.Duration, p Priority) {
	at := d.now() + int64(wait)
	it.delayVal = v
	if it.delayAt == 0 || p > it.delayPrio {
		it.delayPrio = p
	}
	if it.delayAt != 0 && it.delayAt <= at {
		return
	}
	it.delayAt = at
	d.push(delayEntry[K, V]{at: at, gen: it.gen, it: it})
	d.arm()
}

// arm makes sure the timer fires no later than the earliest entry.
func (d *delayQueue[K, V]) arm() {
	if d.stopped || len(d.heap) == 0 {
		return
	}
	first := d.heap[0].at
	if d.armedAt != 0 && first >= d.armedAt {
		return
	}
	d.armedAt = first
	wait := time.Duration(first - d.now())
	if d.timer == nil {
		d.timer = time.AfterFunc(wait, d.fire)
		return
	}
	d.timer.Reset(wait)
}

// fire moves every due key to the ready list and re-arms the timer.
func (d *delayQueue[K, V]) fire() {
	q := d.q
	q.mu.Lock()
	defer q.mu.Unlock()
	d.armedAt = 0
	if d.stopped {
		return
	}
	now := d.now()
	var wall time.Time
	if q.metrics != nil {
		wall = time.Now()
	}
	var zero V
	for len(d.heap) > 0 && d.heap[0].at <= now {
		e := d.pop()
		it := e.it
		if it.gen != e.gen || it.delayAt != e.at {
			continue // stale: brought forward, already fired
		}
		it.delayAt = 0
		v := it.delayVal
		it.delayVal = zero
		q.markDirty(it, v, wall, it.delayPrio)
	}
	d.arm()
}

func (d *delayQueue[K, V]) stop() {
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
	}
	for _, e := range d.heap {
		it := e.it
		if it.gen != e.gen || it.delayAt != e.at {
			continue
		}
		it.delayAt = 0
		if it.idle() {
			d.q.release(it)
		}
	}
	d.heap = nil
}

func (d *delayQueue[K, V]) push(e delayEntry[K, V]) {
	d.heap = append(d.heap, e)
	h := d.heap
	i := len(h) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if h[parent].at <= h[i].at {
			break
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func (d *delayQueue[K, V]) pop() delayEntry[K, V] {
	h := d.heap
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h[last] = delayEntry[K, V]{}
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		small := l
		if r := l + 1; r < len(h) && h[r].at < h[l].at {
			small = r
		}
		if h[i].at <= h[small].at {
			break
		}
		h[i], h[small] = h[small], h[i]
		i = small
	}
	d.heap = h
	return top
}
