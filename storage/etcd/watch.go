package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/internal/eventq"
)

// watchRetryTimeout bounds how long a watch keeps trying to re-establish
// its etcd watch after transient errors (no leader, member unreachable)
// before it ends with an error wrapping storage.ErrInconsistent.
const watchRetryTimeout = 30 * time.Second

// errNoPrevKV ends a watch when etcd reports a deletion without the value
// it deleted, which a Delete event must carry.
var errNoPrevKV = errors.New("etcd: a deletion event came without the deleted value")

// WatchList reads the matching resources at one revision R (the snapshot)
// and places the watch in the backend's change feed right after R, so the
// deltas begin exactly after the snapshot (see WatchListSince).
//
// The snapshot read is monotonic like an eventually consistent Read, so
// it is never older than what this Backend has already returned.
func (b *Backend) WatchList(ctx context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string) (storage.Watch, error) {
	return b.WatchListSince(ctx, resType, tenancy, namePrefix, storage.WatchOptions{})
}

var _ storage.ResumableBackend = (*Backend)(nil)

// WatchListSince is WatchList with opts (see storage.ResumableBackend).
//
// Every watch of the backend reads one shared change feed: a single etcd
// watch of all the backend's resources, with previous values, started
// with the first watch and stopped after the last, whose events are
// decoded once into a ring of recent changes (bounded by WithWatchLogEvents
// and WithWatchLogBytes). A watch is a cursor into the ring with its
// filter; it holds nothing else but the part of its snapshot not yet
// handed out. A consumer that falls off the ring (a change of its type
// dropped before it read it) ends with storage.ErrWatchTooSlow. The feed
// never waits for a watch.
//
// A watch that needs changes the ring does not hold (resumed from an older
// version, or a snapshot older than the ring) first catches up from etcd's
// own history with an etcd watch of its range from that revision, then
// goes on in the ring. At most WithCatchUps watches catch up at once: a
// resume beyond that gets NewSnapshot and a fresh snapshot, a snapshot
// watch waits for a slot. A version etcd has compacted away gives
// NewSnapshot, the snapshot and EndOfSnapshot.
//
// Transient etcd errors (no leader, member unreachable) re-establish the
// feed's etcd watch from the revision after its last event, with
// exponential backoff, for up to 30 s; then, and on etcd compaction of
// revisions the feed still needs, every watch ends with an error wrapping
// ErrCompacted or storage.ErrInconsistent, and the consumer starts a new
// watch.
//
// Bookmarks (opts.BookmarkInterval) come from etcd's progress
// notifications: the feed's etcd watch is alone on its gRPC stream, so a
// progress notification at revision X means the feed has every change up
// to X, and an idle watch that has read the whole ring sends a bookmark at
// that revision. (With several watches on one stream a notification can
// overtake the first events of a watch just created on it, which is why
// no other watch shares the feed's stream.)
func (b *Backend) WatchListSince(ctx context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string, opts storage.WatchOptions) (storage.Watch, error) {
	q, err := b.keys.query(resType, tenancy, namePrefix)
	if err != nil {
		return nil, err
	}
	if opts.SinceVersion == "" {
		return b.snapshotWatch(ctx, q, opts, false)
	}
	since, err := strconv.ParseInt(opts.SinceVersion, 10, 64)
	if err != nil || since < 0 {
		return nil, fmt.Errorf("%w: %q", storage.ErrInvalidVersion, resource.Truncate(opts.SinceVersion))
	}
	cur, resumed, err := b.resumable(ctx, q, since)
	if err != nil {
		return nil, err
	}
	if resumed {
		w := b.newWatch(b.attach(cur+1), q, opts)
		w.sentEOS = true
		if w.place(since, false) {
			b.register(w)
			return w, nil
		}
		// Every catch-up slot is taken: start afresh.
		b.detach(w.f)
	}
	return b.snapshotWatch(ctx, q, opts, true)
}

// resumable reports whether etcd still has every change after revision
// since: it has not compacted it away; cur is etcd's current revision. A
// revision ahead of it is storage.ErrFutureVersion. The read is
// linearizable, so a version any member has handed out is not taken for
// the future.
//
// Both reads ask for one key, not q's range: etcd's current revision and
// its compaction check do not depend on the keys, and counting a range
// walks etcd's index over every key in it (twice 10,000 keys in W9's
// watch-10k).
func (b *Backend) resumable(ctx context.Context, q query, since int64) (cur int64, ok bool, err error) {
	resp, err := b.client.Get(ctx, q.rangePrefix, clientv3.WithCountOnly())
	if err != nil {
		return 0, false, readError(ctx, err)
	}
	cur = resp.Header.Revision
	b.observe(cur)
	switch {
	case since > cur:
		return cur, false, fmt.Errorf("%w: %d, the store is at %d", storage.ErrFutureVersion, since, cur)
	case since == cur:
		return cur, true, nil
	}
	_, err = b.client.Get(ctx, q.rangePrefix, clientv3.WithCountOnly(), clientv3.WithRev(since))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return cur, false, nil
	}
	if err != nil {
		return cur, false, readError(ctx, err)
	}
	return cur, true, nil
}

// snapshotWatch reads the matching resources at one revision R and returns
// a watch that hands out NewSnapshot (if newSnapshot), the snapshot,
// EndOfSnapshot at R, then the changes from R+1 on.
func (b *Backend) snapshotWatch(ctx context.Context, q query, opts storage.WatchOptions, newSnapshot bool) (storage.Watch, error) {
	snap, rev, err := b.readRange(ctx, storage.EventualConsistency, q)
	if err != nil {
		return nil, err
	}
	if b.beforeWatch != nil {
		b.beforeWatch(rev)
	}
	w := b.newWatch(b.attach(rev+1), q, opts)
	w.newSnapshot = newSnapshot
	w.snapshot = snap
	w.snapRev = rev
	if !w.place(rev, false) {
		// The ring has moved past the snapshot (read from a member that
		// lags): wait for a catch-up slot.
		select {
		case b.catchUpSlots <- struct{}{}:
		case <-ctx.Done():
			b.detach(w.f)
			return nil, ctx.Err()
		}
		w.place(rev, true)
	}
	b.register(w)
	return w, nil
}

// newWatch returns a watch of q reading f, not yet placed.
func (b *Backend) newWatch(f *feed, q query, opts storage.WatchOptions) *watch {
	return &watch{b: b, f: f, q: q, interval: opts.BookmarkInterval, done: make(chan struct{})}
}

// place puts the watch in the feed's ring right after revision after, or,
// when the ring lacks changes after it, starts a catch-up from after+1: in
// a slot the caller holds if haveSlot, else in one taken here. It reports
// false when it needed a slot and none was free.
func (w *watch) place(after int64, haveSlot bool) bool {
	f := w.f
	f.mu.RLock()
	pos, have, ok := f.position(w.q.typ, after)
	f.mu.RUnlock()
	if ok && !haveSlot {
		w.pos.Store(pos)
		w.skipTo, w.lastRev = after, have
		w.inRing.Store(true)
		return true
	}
	if ok {
		<-w.b.catchUpSlots // not needed after all
		w.pos.Store(pos)
		w.skipTo, w.lastRev = after, have
		w.inRing.Store(true)
		return true
	}
	if !haveSlot && !w.b.tryCatchUp() {
		return false
	}
	w.lastRev = after
	w.cu = w.b.startCatchUp(f, w.q, after+1)
	w.catchUp = w.cu
	return true
}

// register counts w among the backend's watches, for WatchStats and reaps.
func (b *Backend) register(w *watch) {
	b.watchMu.Lock()
	if b.watches == nil {
		b.watches = make(map[*watch]struct{})
	}
	b.watches[w] = struct{}{}
	b.watchMu.Unlock()
}

// reap ends the watches of f that the ring has left behind and that no
// Next is serving, so that a watch whose consumer stalled lets go of its
// snapshot and of the feed (and is counted as dropped) without waiting for
// its next Next. The feed starts it in its own goroutine, one at a time,
// and never waits for it.
func (b *Backend) reap(f *feed) {
	defer f.reaping.Store(false)
	f.mu.RLock()
	tail := f.tail
	f.mu.RUnlock()
	var behind []*watch
	b.watchMu.Lock()
	for w := range b.watches {
		if w.f == f && w.inRing.Load() && w.pos.Load() < tail {
			behind = append(behind, w)
		}
	}
	b.watchMu.Unlock()
	for _, w := range behind {
		if w.mu.TryLock() {
			if w.err == nil && w.cu == nil {
				f.mu.RLock()
				ok := w.skipGap()
				f.mu.RUnlock()
				if !ok {
					w.tooSlow()
				}
			}
			w.mu.Unlock()
		}
	}
}

// watch is the etcd storage.Watch: a cursor into its feed's ring with its
// query, after a catch-up from etcd's history if it needed one.
type watch struct {
	b        *Backend
	f        *feed
	q        query
	interval time.Duration // between bookmarks; 0: none

	done      chan struct{} // closed by Close
	closeOnce sync.Once
	// catchUp is the watch's catch-up, if it started with one (set before
	// the watch is handed out, then only read).
	catchUp *catchUp

	// pos is the sequence number of the next ring entry to read, once
	// inRing. Only Next changes it; WatchStats and reaps read it.
	pos    atomic.Uint64
	inRing atomic.Bool

	// Consumer side, under mu.
	mu          sync.Mutex
	newSnapshot bool                   // a NewSnapshot event is due first
	snapshot    []*pbresource.Resource // the part not yet delivered
	snapRev     int64
	sentEOS     bool
	cu          *catchUp // while catching up
	skipTo      int64    // ring entries up to this revision are skipped
	lastRev     int64    // every matching change up to it was delivered
	idleSince   time.Time
	err         error // why the watch ended, nil while it runs
	released    bool  // the feed and the backend let go of
}

var _ storage.Watch = (*watch)(nil)

// Next returns the next event: NewSnapshot first if a resume fell back to a
// snapshot, then the snapshot, EndOfSnapshot and the changes in commit
// order, with a Bookmark whenever the watch asked for them and has been
// idle for the interval. After the watch ended it returns why:
// storage.ErrWatchClosed, storage.ErrWatchTooSlow, an error wrapping
// ErrCompacted, or another etcd error; ctx's error if ctx is done while it
// waits. The events are shared and must not be modified.
func (w *watch) Next(ctx context.Context) (*pbresource.WatchEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.f
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
		if !w.sentEOS && w.cu == nil {
			// Say so before handing out the rest of the snapshot.
			f.mu.RLock()
			ok := w.skipGap()
			f.mu.RUnlock()
			if !ok {
				w.tooSlow()
				return nil, w.err
			}
		}
		if w.newSnapshot {
			w.newSnapshot = false
			return eventq.NewSnapshot(), nil
		}
		if len(w.snapshot) > 0 {
			res := w.snapshot[0]
			w.snapshot[0] = nil
			w.snapshot = w.snapshot[1:]
			return eventq.Upsert(res), nil
		}
		if !w.sentEOS {
			w.sentEOS = true
			w.snapshot = nil
			return eventq.EndOfSnapshot(strconv.FormatInt(w.snapRev, 10)), nil
		}
		if w.cu != nil {
			ev, err := w.nextCaughtUp(ctx)
			if ev != nil || err != nil {
				return ev, err
			}
			continue
		}

		// Read the ring up to its head.
		f.mu.RLock()
		if err := f.err; err != nil {
			f.mu.RUnlock()
			w.end(err)
			return nil, err
		}
		if !w.skipGap() {
			f.mu.RUnlock()
			w.tooSlow()
			return nil, w.err
		}
		pos := w.pos.Load()
		for pos < f.head {
			e := f.ring[pos&f.mask]
			pos++
			if e.rev <= w.skipTo {
				continue
			}
			w.lastRev = e.rev
			if e.typ == w.q.typ && w.q.matches(e.tk) {
				w.pos.Store(pos)
				f.mu.RUnlock()
				w.idleSince = time.Time{}
				// Reads after this event must not be older than it.
				w.b.observe(e.rev)
				return e.ev, nil
			}
		}
		w.pos.Store(pos)
		known := f.known
		f.mu.RUnlock()

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
				w.lastRev = max(w.lastRev, known)
				return eventq.Bookmark(strconv.FormatInt(w.lastRev, 10)), nil
			}
			// Ask etcd how far the feed is, so that the bookmark moves
			// with writes outside the backend's keys too.
			f.requestProgress()
			timer = time.NewTimer(w.idleSince.Add(w.interval).Sub(now))
			timeout = timer.C
		}
		wake := f.wait(w.q.typ)
		f.mu.RLock()
		more := f.head > pos || f.err != nil
		f.mu.RUnlock()
		if more {
			stopTimer(timer)
			continue
		}
		// Wait without mu, so that Close is not held up.
		w.mu.Unlock()
		select {
		case <-wake:
		case <-timeout:
		case <-w.done:
		case <-ctx.Done():
			stopTimer(timer)
			w.mu.Lock()
			return nil, ctx.Err()
		}
		stopTimer(timer)
		w.mu.Lock()
	}
}

// nextCaughtUp returns the catch-up's next change, or, when the catch-up
// is over, places the watch in the ring and returns neither an event nor
// an error. The caller holds mu.
func (w *watch) nextCaughtUp(ctx context.Context) (*pbresource.WatchEvent, error) {
	it, err := w.cu.q.Next(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return nil, err
		}
		w.end(err)
		return nil, w.err
	}
	if it.ev != nil {
		w.lastRev = it.rev
		// Reads after this event must not be older than it.
		w.b.observe(it.rev)
		return it.ev, nil
	}
	<-w.cu.done
	w.cu = nil
	f := w.f
	f.mu.RLock()
	pos, have, ok := f.position(w.q.typ, it.rev)
	f.mu.RUnlock()
	if !ok {
		w.tooSlow()
		return nil, w.err
	}
	w.pos.Store(pos)
	w.skipTo, w.lastRev = it.rev, have
	w.inRing.Store(true)
	return nil, nil
}

// skipGap reports whether the ring still holds the changes the watch has
// to read, moving its position past dropped entries of other types (a
// watch of a quiet type is not woken by other types' changes, so the ring
// may move on under it). The caller holds mu and f.mu (read).
func (w *watch) skipGap() bool {
	f := w.f
	pos := w.pos.Load()
	if pos >= f.tail {
		return true
	}
	if tf := f.types[w.q.typ]; tf != nil && tf.droppedSeq > pos {
		return false // an entry of the type was dropped before it was read
	}
	w.pos.Store(f.tail)
	w.lastRev = max(w.lastRev, f.floor)
	return true
}

// tooSlow ends the watch for falling behind. The caller holds mu.
func (w *watch) tooSlow() {
	w.b.dropped.Add(1)
	w.end(storage.ErrWatchTooSlow)
}

// end ends the watch with err, lets go of its snapshot, its catch-up and
// its feed. The caller holds mu.
func (w *watch) end(err error) {
	w.err = err
	w.snapshot = nil
	w.newSnapshot = false
	if w.released {
		return
	}
	w.released = true
	if w.catchUp != nil {
		w.catchUp.stop()
	}
	w.cu = nil
	w.inRing.Store(false)
	w.b.watchMu.Lock()
	delete(w.b.watches, w)
	w.b.watchMu.Unlock()
	w.b.detach(w.f)
}

// Close ends the watch and waits until its etcd watches are released.
// Later calls to Next, and one blocked in Next, return
// storage.ErrWatchClosed. It is safe to call more than once and
// concurrently with Next.
func (w *watch) Close() {
	w.closeOnce.Do(func() {
		close(w.done)
		if w.catchUp != nil {
			// Unblocks a Next waiting for the catch-up.
			w.catchUp.q.Close()
		}
		// Also a watch ended otherwise reports the Close from now on.
		w.mu.Lock()
		w.end(storage.ErrWatchClosed)
		w.mu.Unlock()
	})
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

// WatchStats counts the watches now: those running, the changes waiting
// for their consumers (the ring entries between each watch and the ring's
// head, other types' included, which are no memory of the watch's own,
// plus what a catch-up holds), and the watches ended for falling behind.
// It is meant for a metrics scrape.
func (b *Backend) WatchStats() storage.WatchStats {
	b.watchMu.Lock()
	ws := make([]*watch, 0, len(b.watches))
	for w := range b.watches {
		ws = append(ws, w)
	}
	b.watchMu.Unlock()
	s := storage.WatchStats{Open: len(ws), Dropped: b.dropped.Load()}
	for _, w := range ws {
		if w.catchUp != nil {
			s.Buffered += w.catchUp.q.Buffered()
		}
		if w.inRing.Load() {
			w.f.mu.RLock()
			head := w.f.head
			w.f.mu.RUnlock()
			if p := w.pos.Load(); p < head {
				s.Buffered += int(head - p)
			}
		}
	}
	return s
}
