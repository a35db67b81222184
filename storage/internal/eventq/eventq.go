// Package eventq is the buffer between a backend's change feed and one
// storage.Watch consumer, for a watch that buffers on its own (an etcd
// watch catching up from etcd's history; otherwise the watches of both
// backends are cursors into a shared log). It hands out the
// watch's snapshot, then EndOfSnapshot, then the buffered changes in order;
// the producer never waits for the consumer, and a consumer that leaves more
// than the limit untaken ends the watch with storage.ErrWatchTooSlow.
//
// Changes travel in two slices. The producer appends to pending under mu.
// Next hands out items from batch, which only the consumer touches (under
// nextMu); when batch is used up, Next swaps the two slices under mu, so a
// consumer takes everything buffered with one lock round and the slices'
// arrays are reused without copying or allocating. A consumer blocked in
// Next sets waiting, and the next producer to append wakes it through
// notify, so a producer that finds the consumer busy pays no channel
// operation.
package eventq

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// Queue buffers the items (T: what a backend hands over per change) of one
// watch. The zero value is not usable; call New.
type Queue[T any] struct {
	limit    int
	snapItem func(*pbresource.Resource) T
	eos      T
	onEnd    func()

	notify chan struct{} // capacity 1: wakes a waiting Next
	done   chan struct{} // closed when the watch ends
	ended  atomic.Bool   // set, under mu, with err

	// Consumer side, under nextMu.
	nextMu   sync.Mutex
	snapshot []*pbresource.Resource // the part of the snapshot not yet delivered
	sentEOS  bool
	batch    []T // taken from pending, delivered up to pos
	pos      int

	// Producer side, under mu.
	mu      sync.Mutex
	pending []T
	waiting bool
	err     error // why the watch ended, nil while it runs
}

// New returns a queue that first hands out snapshot (each resource turned
// into an item by snapItem), then eos, then what is pushed. At most limit
// pushed items may wait. onEnd, if set, is called (under the queue's lock,
// so it must not call back into the queue) each time the watch is ended.
func New[T any](limit int, snapshot []*pbresource.Resource, snapItem func(*pbresource.Resource) T, eos T, onEnd func()) *Queue[T] {
	return &Queue[T]{
		limit:    limit,
		snapshot: snapshot,
		snapItem: snapItem,
		eos:      eos,
		onEnd:    onEnd,
		notify:   make(chan struct{}, 1),
		done:     make(chan struct{}),
	}
}

// NewChanges returns a queue that hands out only what is pushed: no
// snapshot and no EndOfSnapshot, for a watch that resumes.
func NewChanges[T any](limit int, onEnd func()) *Queue[T] {
	q := New[T](limit, nil, nil, *new(T), onEnd)
	q.sentEOS = true
	return q
}

// Push appends items, or ends the watch with storage.ErrWatchTooSlow when
// they do not fit. It reports whether the watch is still running, and never
// blocks on the consumer.
func (q *Queue[T]) Push(items ...T) bool {
	running, _ := q.TryPush(items...)
	return running
}

// TryPush is Push that also reports whether this call ended the watch for
// falling behind (false when it had ended before), for counting dropped
// watches.
func (q *Queue[T]) TryPush(items ...T) (running, endedNow bool) {
	q.mu.Lock()
	if q.err != nil {
		q.mu.Unlock()
		return false, false
	}
	if len(q.pending)+len(items) > q.limit {
		q.endLocked(storage.ErrWatchTooSlow)
		q.mu.Unlock()
		return false, true
	}
	q.pending = append(q.pending, items...)
	wake := q.waiting
	q.waiting = false
	q.mu.Unlock()
	if wake {
		select {
		case q.notify <- struct{}{}:
		default:
		}
	}
	return true, false
}

// Buffered returns how many pushed items wait for the consumer: those not
// yet taken from the producer's side and those taken but not handed out
// (the snapshot is not counted). It takes both of the queue's locks: for
// metrics, not for a hot path.
func (q *Queue[T]) Buffered() int {
	q.nextMu.Lock()
	defer q.nextMu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return 0 // dropped; the consumer's side is released by its next Next
	}
	return len(q.batch) - q.pos + len(q.pending)
}

// End ends the watch with err, unless it has ended already.
func (q *Queue[T]) End(err error) {
	q.mu.Lock()
	if q.err == nil {
		q.endLocked(err)
	}
	q.mu.Unlock()
}

// Close ends the watch with storage.ErrWatchClosed (also after another end,
// so Next then reports the Close) and reports whether it was still running.
// Closing twice does nothing the second time.
func (q *Queue[T]) Close() (wasRunning bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err == storage.ErrWatchClosed {
		return false
	}
	wasRunning = q.err == nil
	q.endLocked(storage.ErrWatchClosed)
	return wasRunning
}

// endLocked records err, drops what the producer buffered and wakes a
// blocked Next; the consumer side is released by the next call to Next.
// The caller holds mu.
func (q *Queue[T]) endLocked(err error) {
	if q.err == nil {
		close(q.done)
	}
	q.err = err
	q.ended.Store(true)
	q.pending = nil
	if q.onEnd != nil {
		q.onEnd()
	}
}

// Next returns the next item: the snapshot's, then eos, then the pushed
// ones in order. Once the watch has ended it returns why at once (what was
// buffered is discarded). Once ctx is done it returns ctx's error, also
// when items are buffered (they stay for a later call with another
// context), so a consumer told to stop does not first drain a backlog.
//
// Next is meant to be called by one goroutine at a time; concurrent calls
// are safe, but each item goes to only one of them.
func (q *Queue[T]) Next(ctx context.Context) (T, error) {
	var zero T
	// For the standard library's contexts Err is an atomic load: no lock
	// and no allocation per item (a few ns; BenchmarkNext).
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	q.nextMu.Lock()
	for {
		if q.ended.Load() {
			q.snapshot, q.batch, q.pos = nil, nil, 0
			q.nextMu.Unlock()
			q.mu.Lock()
			err := q.err
			q.mu.Unlock()
			return zero, err
		}
		if len(q.snapshot) > 0 {
			res := q.snapshot[0]
			q.snapshot[0] = nil
			q.snapshot = q.snapshot[1:]
			q.nextMu.Unlock()
			return q.snapItem(res), nil
		}
		if !q.sentEOS {
			q.sentEOS = true
			q.snapshot = nil
			q.nextMu.Unlock()
			return q.eos, nil
		}
		if q.pos < len(q.batch) {
			it := q.batch[q.pos]
			q.batch[q.pos] = zero
			q.pos++
			q.nextMu.Unlock()
			return it, nil
		}

		q.mu.Lock()
		if q.err != nil {
			q.mu.Unlock()
			continue // reported at the top of the loop
		}
		if len(q.pending) > 0 {
			spare := q.batch[:0]
			if cap(spare) > 1024 && cap(spare) > 4*len(q.pending) {
				spare = nil // let a burst's buffer go once the burst is over
			}
			q.batch, q.pending = q.pending, spare
			q.pos = 0
			q.mu.Unlock()
			continue
		}
		q.waiting = true
		q.mu.Unlock()

		// Wait without nextMu, so that a concurrent Next can still honour
		// its own context.
		q.nextMu.Unlock()
		select {
		case <-q.notify:
		case <-q.done:
		case <-ctx.Done():
			q.mu.Lock()
			q.waiting = false
			q.mu.Unlock()
			return zero, ctx.Err()
		}
		q.nextMu.Lock()
	}
}

// upsertEvent and deleteEvent hold the three messages of an event, so that
// making one costs one allocation instead of three.
type upsertEvent struct {
	ev     pbresource.WatchEvent
	oneof  pbresource.WatchEvent_Upsert_
	upsert pbresource.WatchEvent_Upsert
}

type deleteEvent struct {
	ev     pbresource.WatchEvent
	oneof  pbresource.WatchEvent_Delete_
	delete pbresource.WatchEvent_Delete
}

// NewEvent returns an Upsert event for res, or a Delete event when deleted
// (at store version deletedAt, "" when the backend does not say).
func NewEvent(res *pbresource.Resource, deleted bool, deletedAt string) *pbresource.WatchEvent {
	if deleted {
		b := new(deleteEvent)
		b.delete.Resource = res
		b.delete.Version = deletedAt
		b.oneof.Delete = &b.delete
		b.ev.Event = &b.oneof
		return &b.ev
	}
	b := new(upsertEvent)
	b.upsert.Resource = res
	b.oneof.Upsert = &b.upsert
	b.ev.Event = &b.oneof
	return &b.ev
}

// EndOfSnapshot returns an EndOfSnapshot event for a snapshot consistent
// at version ("" when the backend does not say).
func EndOfSnapshot(version string) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{
		EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{Version: version},
	}}
}

// NewSnapshot returns a NewSnapshot event: a watch asked to resume cannot,
// and a snapshot follows.
func NewSnapshot() *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_NewSnapshot_{
		NewSnapshot: &pbresource.WatchEvent_NewSnapshot{},
	}}
}

// Bookmark returns a Bookmark event at version.
func Bookmark(version string) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Bookmark_{
		Bookmark: &pbresource.WatchEvent_Bookmark{Version: version},
	}}
}

// Upsert turns a snapshot resource into its Upsert event.
func Upsert(res *pbresource.Resource) *pbresource.WatchEvent { return NewEvent(res, false, "") }
