package inmem

import (
	"context"
	"slices"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/internal/eventq"
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
	}
	var snapshot []*pbresource.Resource

	// Holding mu shared keeps writers out while the snapshot is taken and
	// the watch registered; watchMu orders this with other WatchList and
	// Close calls, which also hold mu only shared.
	b.mu.RLock()
	if ti := b.types[resType]; ti != nil {
		for _, e := range ti.byKey {
			if w.filter.matches(e.key) {
				snapshot = append(snapshot, e.res)
			}
		}
	}
	w.buf = eventq.New(b.watchBuffer, snapshot, eventq.Upsert, eventq.EndOfSnapshot(), nil)
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
			ev = eventq.NewEvent(res, deleted)
		}
		running, dropped := w.buf.TryPush(ev)
		if running {
			kept = append(kept, w)
		}
		if dropped {
			b.dropped.Add(1)
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

// watch is the inmem storage.Watch: a filter in the fan-out, and the queue
// that buffers its events for the consumer.
type watch struct {
	b      *Backend
	typ    storage.UnversionedType
	filter filter
	buf    *eventq.Queue[*pbresource.WatchEvent]
}

var _ storage.Watch = (*watch)(nil)

// Next returns the next event: first the snapshot, then EndOfSnapshot, then
// the changes in commit order. It returns storage.ErrWatchTooSlow as soon as
// the watch has been dropped for falling behind (what was buffered is
// discarded), storage.ErrWatchClosed after Close, and ctx's error if ctx is
// done while it waits. The events are shared and must not be modified.
func (w *watch) Next(ctx context.Context) (*pbresource.WatchEvent, error) {
	return w.buf.Next(ctx)
}

// Close ends the watch: later calls to Next, and one blocked in Next,
// return storage.ErrWatchClosed. It is safe to call more than once and
// concurrently with Next.
func (w *watch) Close() {
	if w.buf.Close() {
		w.b.unregister(w)
	}
}
