package inmem

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// WatchList returns a Watch over the resources List would return for the
// same arguments: WatchListSince without options.
func (b *Backend) WatchList(ctx context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string) (storage.Watch, error) {
	return b.WatchListSince(ctx, resType, tenancy, namePrefix, storage.WatchOptions{})
}

// WatchListSince returns a Watch over the resources List would return for
// the same arguments, resumed after opts.SinceVersion when the event log
// still holds every change since, with bookmarks when
// opts.BookmarkInterval is positive (see storage.ResumableBackend). The
// snapshot is taken and the watch's place in the log fixed under the store
// lock, so the changes start exactly after the snapshot. ctx only governs
// this call; the watch lives until Close or until the log drops a change
// it has not read (storage.ErrWatchTooSlow).
func (b *Backend) WatchListSince(_ context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string, opts storage.WatchOptions) (storage.Watch, error) {
	var since uint64
	if opts.SinceVersion != "" {
		v, err := strconv.ParseUint(opts.SinceVersion, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %q", storage.ErrInvalidVersion, truncate(opts.SinceVersion))
		}
		since = v
	}
	w := &watch{
		b:        b,
		typ:      resType,
		filter:   newFilter(tenancy, namePrefix),
		interval: opts.BookmarkInterval,
		done:     make(chan struct{}),
	}

	// Holding mu shared keeps writers out while the snapshot is taken and
	// the watch placed; watchMu orders this with other WatchList and Close
	// calls, which also hold mu only shared.
	b.mu.RLock()
	defer b.mu.RUnlock()
	b.watchMu.Lock()
	f := b.feeds[resType]
	if f == nil {
		f = b.newFeed(resType)
		b.feeds[resType] = f
	}
	b.watchMu.Unlock()
	w.feed = f
	if opts.SinceVersion != "" {
		if since > b.revision {
			return nil, fmt.Errorf("%w: since version %d, store version %d", storage.ErrFutureVersion, since, b.revision)
		}
		// The log has every change of the type after since if it has
		// every change after since, or has dropped none of the type's
		// after it (the watch then skips what it lacks, see skipGap).
		if since+1 >= b.log.tail.Load() || f.dropped.Load() <= since {
			w.sentEOS = true
		} else {
			w.newSnapshot = true
		}
	}
	if w.sentEOS {
		w.lastRev = since
	} else {
		w.lastRev = b.revision
		if ti := b.types[resType]; ti != nil {
			for e := range ti.byKey.all {
				if w.filter.matches(e.key) {
					w.snapshot = append(w.snapshot, e.res)
				}
			}
		}
	}
	w.pos.Store(w.lastRev + 1)

	b.watchMu.Lock()
	b.watches[w] = struct{}{}
	b.watchMu.Unlock()
	return w, nil
}

// truncate shortens s for an error message.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// reapEvery is how many changes apart the log's writers start a reap.
const reapEvery = 1024

// reap ends the watches the log has left behind and that no Next is
// serving, so that a watch whose consumer stalled lets go of its snapshot
// (and is counted as dropped) without waiting for its next Next. Writers
// start it in its own goroutine, one at a time, and never wait for it.
func (b *Backend) reap() {
	defer b.reaping.Store(false)
	tail := b.log.tail.Load()
	var behind []*watch
	b.watchMu.Lock()
	for w := range b.watches {
		if w.pos.Load() < tail {
			behind = append(behind, w)
		}
	}
	b.watchMu.Unlock()
	for _, w := range behind {
		if w.mu.TryLock() {
			if w.err == nil {
				w.keepingUp()
			}
			w.mu.Unlock()
		}
	}
}

// forget removes w from the watches WatchStats counts.
func (b *Backend) forget(w *watch) {
	b.watchMu.Lock()
	delete(b.watches, w)
	b.watchMu.Unlock()
}

// watch is the inmem storage.Watch: a cursor into the store's event log,
// with its filter. It holds no events of its own, only the snapshot it has
// not handed out yet.
type watch struct {
	b        *Backend
	typ      storage.UnversionedType
	filter   filter
	feed     *feed
	interval time.Duration // between bookmarks; 0: none

	done      chan struct{} // closed by Close
	closeOnce sync.Once

	// pos is the revision of the next log entry to read. Only Next changes
	// it; WatchStats reads it.
	pos atomic.Uint64

	// Consumer side, under mu.
	mu          sync.Mutex
	newSnapshot bool                   // a NewSnapshot event is due first
	snapshot    []*pbresource.Resource // the part not yet delivered
	sentEOS     bool
	lastRev     uint64    // every matching change up to it was delivered
	idleSince   time.Time // when Next last found nothing to deliver
	err         error     // why the watch ended, nil while it runs
	// timer is the bookmark timer a waiting Next reuses, so that waiting
	// allocates nothing; busy while one Next waits on it (a concurrent Next
	// with another context makes its own).
	timer     *time.Timer
	timerBusy bool
}

var _ storage.Watch = (*watch)(nil)

// Next returns the next event: NewSnapshot first if a resume fell back to a
// snapshot, then the snapshot, EndOfSnapshot and the changes in commit
// order, with a Bookmark whenever the watch asked for them and has been
// idle for the interval. It returns storage.ErrWatchTooSlow once the log
// has dropped a change the watch had not read, storage.ErrWatchClosed after
// Close, and ctx's error if ctx is done while it waits. The events are
// shared and must not be modified.
func (w *watch) Next(ctx context.Context) (*pbresource.WatchEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.b.log
	for {
		if w.err == nil {
			select {
			case <-w.done:
				w.end(storage.ErrWatchClosed)
			default:
			}
		}
		if w.err != nil {
			return nil, w.err
		}
		if !w.sentEOS && !w.keepingUp() {
			// Say so before handing out the rest of the snapshot.
			return nil, w.err
		}
		if w.newSnapshot {
			w.newSnapshot = false
			return newSnapshotEvent(), nil
		}
		if len(w.snapshot) > 0 {
			res := w.snapshot[0]
			w.snapshot[0] = nil
			w.snapshot = w.snapshot[1:]
			return upsertEvent(res), nil
		}
		if !w.sentEOS {
			w.sentEOS = true
			w.snapshot = nil
			return endOfSnapshotEvent(w.lastRev), nil
		}

		// Read the log up to what is published.
		pos := w.pos.Load()
		for n := l.next.Load(); pos < n; {
			e := l.entry(pos)
			if e == nil {
				w.pos.Store(pos)
				if !w.keepingUp() {
					return nil, w.err
				}
				pos = w.pos.Load()
				continue
			}
			pos++
			w.lastRev = e.rev
			if e.feed == w.feed && w.filter.matches(e.key()) { // one feed per type
				w.pos.Store(pos)
				w.idleSince = time.Time{}
				return e.ev, nil
			}
		}
		w.pos.Store(pos)

		// Caught up: a bookmark if one is due, else wait.
		var (
			timer   *time.Timer
			timeout <-chan time.Time
		)
		if w.interval > 0 {
			now := time.Now()
			if w.idleSince.IsZero() {
				w.idleSince = now
			} else if now.Sub(w.idleSince) >= w.interval {
				w.idleSince = now
				return bookmarkEvent(w.lastRev), nil
			}
			timer = w.takeTimer(w.idleSince.Add(w.interval).Sub(now))
			timeout = timer.C
		}
		wake := w.feed.wait()
		if l.next.Load() > pos {
			w.putTimer(timer)
			continue
		}
		// Wait without mu, so that Close and a concurrent Next with
		// another context are not held up.
		w.mu.Unlock()
		select {
		case <-wake:
		case <-timeout:
		case <-w.done:
		case <-ctx.Done():
			w.mu.Lock()
			w.putTimer(timer)
			return nil, ctx.Err()
		}
		w.mu.Lock()
		w.putTimer(timer)
	}
}

// takeTimer returns a timer that fires after d: the watch's own, unless
// another Next waits on it. The caller holds mu.
func (w *watch) takeTimer(d time.Duration) *time.Timer {
	if w.timerBusy {
		return time.NewTimer(d)
	}
	w.timerBusy = true
	if w.timer == nil {
		w.timer = time.NewTimer(d)
	} else {
		// Since Go 1.23 a Reset timer delivers no value from before it.
		w.timer.Reset(d)
	}
	return w.timer
}

// putTimer stops t, taken with takeTimer (nil: none), and gives the
// watch's own back. The caller holds mu.
func (w *watch) putTimer(t *time.Timer) {
	if t == nil {
		return
	}
	t.Stop()
	if t == w.timer {
		w.timerBusy = false
	}
}

// keepingUp reports whether the log still holds the changes the watch has
// to read, or only drops changes of other types; otherwise it ends the
// watch with storage.ErrWatchTooSlow. The caller holds mu.
func (w *watch) keepingUp() bool {
	if w.pos.Load() >= w.b.log.tail.Load() || w.skipGap() {
		return true
	}
	w.b.dropped.Add(1)
	w.end(storage.ErrWatchTooSlow)
	return false
}

// skipGap is called when the log no longer holds the entry at pos: it
// moves pos past the dropped entries if none of them is of the watch's type
// (a watch of a quiet type is not woken by other types' changes, so the log
// may move on under it), and reports whether it could. The caller holds mu.
func (w *watch) skipGap() bool {
	l := w.b.log
	pos := w.pos.Load()
	// The log records a drop in the type's feed before it moves the tail
	// past it, so loading the tail first makes dropped cover every entry
	// of the type below it.
	t := l.tail.Load()
	if w.feed.dropped.Load() >= pos {
		return false // an entry of the type was dropped before it was read
	}
	if t > pos {
		w.pos.Store(t)
		w.lastRev = t - 1
	}
	return true
}

// end ends the watch with err and lets go of its snapshot. The caller
// holds mu.
func (w *watch) end(err error) {
	w.err = err
	w.snapshot = nil
	w.newSnapshot = false
	w.b.forget(w)
}

// Close ends the watch: later calls to Next, and one blocked in Next,
// return storage.ErrWatchClosed. It is safe to call more than once and
// concurrently with Next.
func (w *watch) Close() {
	w.closeOnce.Do(func() {
		close(w.done)
		// Also a watch ended otherwise reports the Close from now on.
		w.mu.Lock()
		w.end(storage.ErrWatchClosed)
		w.mu.Unlock()
	})
}

// buffered returns how many log entries lie between the watch and the head
// of the log, for WatchStats.
func (w *watch) buffered() int {
	n, p := w.b.log.next.Load(), w.pos.Load()
	if p >= n {
		return 0
	}
	return int(n - p)
}

func upsertEvent(res *pbresource.Resource) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{
		Upsert: &pbresource.WatchEvent_Upsert{Resource: res}}}
}

func endOfSnapshotEvent(rev uint64) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{
		EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{Version: strconv.FormatUint(rev, 10)}}}
}

func newSnapshotEvent() *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_NewSnapshot_{
		NewSnapshot: &pbresource.WatchEvent_NewSnapshot{}}}
}

func bookmarkEvent(rev uint64) *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Bookmark_{
		Bookmark: &pbresource.WatchEvent_Bookmark{Version: strconv.FormatUint(rev, 10)}}}
}
