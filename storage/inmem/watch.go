package inmem

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

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

// watch is the inmem storage.Watch.
//
// Changes travel in two slices. Writers append to pending under mu. Next
// hands out events from batch, which only the consumer touches (under
// nextMu); when batch is used up, Next swaps the two slices under mu, so a
// consumer takes everything buffered with one lock round and the slices'
// arrays are reused without copying or allocating. A consumer blocked in
// Next sets waiting, and the next writer to append wakes it through notify,
// so writers that find the consumer busy pay no channel operation.
type watch struct {
	b      *Backend
	typ    storage.UnversionedType
	filter filter
	limit  int

	notify chan struct{} // capacity 1
	done   chan struct{} // closed when the watch ends (Close or too slow)
	ended  atomic.Bool   // set, under mu, when err is

	// Consumer side.
	nextMu   sync.Mutex
	snapshot []*pbresource.Resource // the part of the snapshot not yet delivered
	sentEOS  bool
	batch    []*pbresource.WatchEvent // taken from pending, delivered up to pos
	pos      int

	// Producer side.
	mu      sync.Mutex
	pending []*pbresource.WatchEvent
	waiting bool
	err     error // why the watch ended, nil while it runs
}

var _ storage.Watch = (*watch)(nil)

// push appends ev, or ends the watch with storage.ErrWatchTooSlow when the
// consumer left the buffer full. It reports whether the watch is still
// running. It never blocks on the consumer.
func (w *watch) push(ev *pbresource.WatchEvent) bool {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return false
	}
	if len(w.pending) >= w.limit {
		w.endLocked(storage.ErrWatchTooSlow)
		w.mu.Unlock()
		return false
	}
	w.pending = append(w.pending, ev)
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

// endLocked ends the watch with err, dropping what writers buffered and
// waking a blocked Next. The consumer side is released by the next call to
// Next. The caller holds mu.
func (w *watch) endLocked(err error) {
	if w.err == nil {
		close(w.done)
	}
	w.err = err
	w.ended.Store(true)
	w.pending = nil
}

// Next returns the next event: first the snapshot, then EndOfSnapshot, then
// the changes in commit order. It returns storage.ErrWatchTooSlow as soon as
// the watch has been dropped for falling behind (what was buffered is
// discarded), storage.ErrWatchClosed after Close, and ctx's error if ctx is
// done while it waits. The events are shared and must not be modified.
//
// Next is meant to be called by one goroutine at a time; concurrent calls
// are safe, but each event goes to only one of them.
func (w *watch) Next(ctx context.Context) (*pbresource.WatchEvent, error) {
	w.nextMu.Lock()
	for {
		if w.ended.Load() {
			w.snapshot, w.batch, w.pos = nil, nil, 0
			w.nextMu.Unlock()
			w.mu.Lock()
			err := w.err
			w.mu.Unlock()
			return nil, err
		}
		if len(w.snapshot) > 0 {
			res := w.snapshot[0]
			w.snapshot[0] = nil
			w.snapshot = w.snapshot[1:]
			w.nextMu.Unlock()
			return newEvent(res, false), nil
		}
		if !w.sentEOS {
			w.sentEOS = true
			w.snapshot = nil
			w.nextMu.Unlock()
			return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{
				EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{},
			}}, nil
		}
		if w.pos < len(w.batch) {
			ev := w.batch[w.pos]
			w.batch[w.pos] = nil
			w.pos++
			w.nextMu.Unlock()
			return ev, nil
		}

		w.mu.Lock()
		if w.err != nil {
			w.mu.Unlock()
			continue // reported at the top of the loop
		}
		if len(w.pending) > 0 {
			spare := w.batch[:0]
			if cap(spare) > 1024 && cap(spare) > 4*len(w.pending) {
				spare = nil // let a burst's buffer go once the burst is over
			}
			w.batch, w.pending = w.pending, spare
			w.pos = 0
			w.mu.Unlock()
			continue
		}
		w.waiting = true
		w.mu.Unlock()

		// Wait without nextMu, so that a concurrent Next can still honour
		// its own context.
		w.nextMu.Unlock()
		select {
		case <-w.notify:
		case <-w.done:
		case <-ctx.Done():
			w.mu.Lock()
			w.waiting = false
			w.mu.Unlock()
			return nil, ctx.Err()
		}
		w.nextMu.Lock()
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
