package inmem

import (
	"context"
	"slices"
	"sync"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// initialWatchBuffer is the ring size a watch starts with; it doubles on
// demand up to the backend's watch buffer size.
const initialWatchBuffer = 64

// WatchList returns a Watch over the resources List would return for the
// same arguments. The snapshot is taken and the watch registered under the
// store lock, so the deltas start exactly after the snapshot. ctx only
// governs this call; the watch lives until Close or until it falls behind
// (storage.ErrWatchTooSlow).
func (b *Backend) WatchList(_ context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string) (storage.Watch, error) {
	w := &watch{
		b:      b,
		typ:    resType,
		filter: newFilter(tenancy, namePrefix),
		limit:  b.watchBuffer,
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}

	// Holding mu shared keeps writers out while the snapshot is taken and
	// the watch registered; watchMu orders this with other WatchList and
	// Close calls, which also hold mu only shared.
	b.mu.RLock()
	if ti := b.types[resType]; ti != nil {
		for _, e := range ti.byKey {
			if w.filter.matches(e.key) {
				w.snapshot = append(w.snapshot, e.res)
			}
		}
	}
	b.watchMu.Lock()
	b.watches[resType] = append(b.watches[resType], w)
	b.watchMu.Unlock()
	b.mu.RUnlock()

	return w, nil
}

// publish hands a change to every watch of typ whose filter matches key,
// dropping the watches that are closed or too slow. The caller holds mu
// exclusively. One event is allocated and shared by all watches.
func (b *Backend) publish(typ storage.UnversionedType, key rkey, res *pbresource.Resource, deleted bool) {
	ws := b.watches[typ]
	if len(ws) == 0 {
		return
	}
	var ev *pbresource.WatchEvent
	kept := ws[:0]
	for _, w := range ws {
		if !w.filter.matches(key) {
			kept = append(kept, w)
			continue
		}
		if ev == nil {
			ev = newEvent(res, deleted)
		}
		if w.push(ev) {
			kept = append(kept, w)
		}
	}
	if len(kept) < len(ws) {
		clear(ws[len(kept):])
		if len(kept) == 0 {
			delete(b.watches, typ)
		} else {
			b.watches[typ] = kept
		}
	}
}

// unregister removes w from the fan-out, if it is still there.
func (b *Backend) unregister(w *watch) {
	b.mu.RLock()
	b.watchMu.Lock()
	ws := b.watches[w.typ]
	for i, x := range ws {
		if x == w {
			ws = slices.Delete(ws, i, i+1)
			if len(ws) == 0 {
				delete(b.watches, w.typ)
			} else {
				b.watches[w.typ] = ws
			}
			break
		}
	}
	b.watchMu.Unlock()
	b.mu.RUnlock()
}

func newEvent(res *pbresource.Resource, deleted bool) *pbresource.WatchEvent {
	if deleted {
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Delete_{
			Delete: &pbresource.WatchEvent_Delete{Resource: res},
		}}
	}
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{
		Upsert: &pbresource.WatchEvent_Upsert{Resource: res},
	}}
}

// watch is the inmem storage.Watch. Writers append to its ring under mu;
// Next takes from it. A consumer blocked in Next sets waiting, and the next
// writer to append wakes it through notify, so writers that find the
// consumer busy pay no channel operation.
type watch struct {
	b      *Backend
	typ    storage.UnversionedType
	filter filter
	limit  int

	notify chan struct{} // capacity 1
	done   chan struct{} // closed when the watch ends (Close or too slow)

	mu       sync.Mutex
	snapshot []*pbresource.Resource // not yet delivered part of the snapshot
	sentEOS  bool
	ring     []*pbresource.WatchEvent
	head, n  int
	waiting  bool
	err      error // why the watch ended, nil while it runs
}

var _ storage.Watch = (*watch)(nil)

// push appends ev, or ends the watch with storage.ErrWatchTooSlow when its
// buffer is full. It reports whether the watch is still running. It never
// blocks on the consumer.
func (w *watch) push(ev *pbresource.WatchEvent) bool {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return false
	}
	if w.n == len(w.ring) {
		if w.n >= w.limit {
			w.endLocked(storage.ErrWatchTooSlow)
			w.mu.Unlock()
			return false
		}
		w.grow()
	}
	i := w.head + w.n
	if i >= len(w.ring) {
		i -= len(w.ring)
	}
	w.ring[i] = ev
	w.n++
	wake := w.waiting
	w.waiting = false
	w.mu.Unlock()

	if wake {
		select {
		case w.notify <- struct{}{}:
		default:
		}
	}
	return true
}

// grow doubles the ring (up to the limit), keeping its order. The caller
// holds mu.
func (w *watch) grow() {
	size := min(max(2*len(w.ring), initialWatchBuffer), w.limit)
	ring := make([]*pbresource.WatchEvent, size)
	k := copy(ring, w.ring[w.head:])
	copy(ring[k:], w.ring[:w.head])
	w.ring = ring
	w.head = 0
}

// endLocked ends the watch with err, releasing its buffers and waking a
// blocked Next. The caller holds mu.
func (w *watch) endLocked(err error) {
	if w.err == nil {
		close(w.done)
	}
	w.err = err
	w.ring = nil
	w.head, w.n = 0, 0
	w.snapshot = nil
}

// Next returns the next event: first the snapshot, then EndOfSnapshot, then
// the changes in commit order. It returns storage.ErrWatchTooSlow as soon as
// the watch has been dropped for falling behind (buffered events are
// discarded), storage.ErrWatchClosed after Close, and ctx's error if ctx is
// done while it waits. The events are shared and must not be modified.
func (w *watch) Next(ctx context.Context) (*pbresource.WatchEvent, error) {
	for {
		w.mu.Lock()
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return nil, err
		}
		if len(w.snapshot) > 0 {
			res := w.snapshot[0]
			w.snapshot[0] = nil
			w.snapshot = w.snapshot[1:]
			w.mu.Unlock()
			return newEvent(res, false), nil
		}
		if !w.sentEOS {
			w.sentEOS = true
			w.snapshot = nil
			w.mu.Unlock()
			return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{
				EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{},
			}}, nil
		}
		if w.n > 0 {
			ev := w.ring[w.head]
			w.ring[w.head] = nil
			w.head++
			if w.head == len(w.ring) {
				w.head = 0
			}
			w.n--
			w.mu.Unlock()
			return ev, nil
		}
		w.waiting = true
		w.mu.Unlock()

		select {
		case <-w.notify:
		case <-w.done:
		case <-ctx.Done():
			w.mu.Lock()
			w.waiting = false
			w.mu.Unlock()
			return nil, ctx.Err()
		}
	}
}

// Close ends the watch: later calls to Next, and one blocked in Next,
// return storage.ErrWatchClosed. It is safe to call more than once and
// concurrently with Next.
func (w *watch) Close() {
	w.mu.Lock()
	if w.err == storage.ErrWatchClosed {
		w.mu.Unlock()
		return
	}
	running := w.err == nil
	w.endLocked(storage.ErrWatchClosed)
	w.mu.Unlock()

	if running {
		w.b.unregister(w)
	}
}
