package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loomrt/loom/internal/retry"
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

// WatchList reads the matching resources at one revision R (the snapshot),
// and starts an etcd watch of the same key range from R+1, so the deltas
// begin exactly after the snapshot: etcd numbers every change, and the
// watch replays from its history whatever happened after R, even if that
// is already past. PUT events become Upserts, DELETE events Deletes that
// carry the deleted value (the watch asks etcd for previous values).
//
// The snapshot read is monotonic like an eventually consistent Read, so
// it is never older than what this Backend has already returned.
//
// A goroutine per watch takes events from etcd, decodes and filters them
// and buffers them for Next, up to the watch buffer size (see
// WithWatchBufferSize); a consumer that leaves more than that untaken ends
// the watch with storage.ErrWatchTooSlow. Transient errors (no leader,
// member unreachable) re-establish the etcd watch from the revision after
// the last event received, with exponential backoff, for up to 30 s; then,
// and on etcd compaction of revisions the watch still needs (ErrCompacted),
// the watch ends with an error. The consumer starts a new WatchList; its
// snapshot replaces everything.
func (b *Backend) WatchList(ctx context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string) (storage.Watch, error) {
	return b.WatchListSince(ctx, resType, tenancy, namePrefix, storage.WatchOptions{})
}

var _ storage.ResumableBackend = (*Backend)(nil)

// WatchListSince is WatchList with opts (see storage.ResumableBackend),
// using etcd's own history: a watch resumed from version V is an etcd
// watch from revision V+1, which etcd can start as long as it has not
// compacted V away; after such a compaction the watch starts afresh with
// NewSnapshot, the snapshot and EndOfSnapshot.
//
// It sends no bookmarks (opts.BookmarkInterval is ignored). etcd's progress
// notifications would give them, but they are not safe to use here: etcd
// answers a progress request for a whole watch stream at once, and one can
// overtake the first events of a watch just created on the stream (seen
// with etcd 3.7.3 under the conformance suite's racing writers: progress at
// revision 75 before the events from 34 of a watch resumed from 33), which
// would make a bookmark skip them.
func (b *Backend) WatchListSince(ctx context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string, opts storage.WatchOptions) (storage.Watch, error) {
	q, err := b.keys.query(resType, tenancy, namePrefix)
	if err != nil {
		return nil, err
	}
	if opts.SinceVersion != "" {
		since, err := strconv.ParseInt(opts.SinceVersion, 10, 64)
		if err != nil || since < 0 {
			return nil, fmt.Errorf("%w: %q", storage.ErrInvalidVersion, resource.Truncate(opts.SinceVersion))
		}
		resumed, err := b.resumable(ctx, q, since)
		if err != nil {
			return nil, err
		}
		if resumed {
			return b.watchFrom(q, nil, false, since+1, nil), nil
		}
		return b.snapshotWatch(ctx, q, eventq.NewSnapshot())
	}
	return b.snapshotWatch(ctx, q, nil)
}

// resumable reports whether etcd still has every change after revision
// since: it has not compacted it away. A revision ahead of etcd's current
// one is storage.ErrFutureVersion. The read is linearizable, so a version
// any member has handed out is not taken for the future.
func (b *Backend) resumable(ctx context.Context, q query, since int64) (bool, error) {
	resp, err := b.client.Get(ctx, q.rangePrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return false, readError(ctx, err)
	}
	cur := resp.Header.Revision
	b.observe(cur)
	switch {
	case since > cur:
		return false, fmt.Errorf("%w: %d, the store is at %d", storage.ErrFutureVersion, since, cur)
	case since == cur:
		return true, nil
	}
	_, err = b.client.Get(ctx, q.rangePrefix, clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithRev(since))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return false, nil
	}
	if err != nil {
		return false, readError(ctx, err)
	}
	return true, nil
}

// snapshotWatch reads the matching resources at one revision R and starts
// a watch that hands out first (if not nil), the snapshot, EndOfSnapshot
// at R, then the changes from R+1 on.
func (b *Backend) snapshotWatch(ctx context.Context, q query, first *pbresource.WatchEvent) (storage.Watch, error) {
	resp, err := b.get(ctx, storage.EventualConsistency, q.rangePrefix, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	snap, err := q.collect(resp.Kvs)
	if err != nil {
		return nil, err
	}
	rev := resp.Header.Revision
	if b.beforeWatch != nil {
		b.beforeWatch(rev)
	}
	return b.watchFrom(q, snap, true, rev+1, first), nil
}

// watchFrom starts a watch that hands out first (if not nil), then, if
// withSnapshot, snap and EndOfSnapshot, then the changes from revision
// from on. Without a snapshot it is a resumed watch: changes only.
func (b *Backend) watchFrom(q query, snap []*pbresource.Resource, withSnapshot bool, from int64, first *pbresource.WatchEvent) *watch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watch{
		b:       b,
		q:       q,
		stopped: make(chan struct{}),
		first:   first,
	}
	// Ending the watch, for whatever reason, stops the etcd watch.
	if !withSnapshot {
		w.buf = eventq.NewChanges[item](b.watchBuffer, cancel)
	} else {
		eos := eventq.EndOfSnapshot(strconv.FormatInt(from-1, 10))
		w.buf = eventq.New(b.watchBuffer, snap, snapshotItem, item{ev: eos}, cancel)
	}
	b.watchMu.Lock()
	if b.watches == nil {
		b.watches = make(map[*watch]struct{})
	}
	b.watches[w] = struct{}{}
	b.watchMu.Unlock()
	go w.run(ctx, from)
	return w
}

// item is an event and the revision of the change it reports.
type item struct {
	ev  *pbresource.WatchEvent
	rev int64
}

// snapshotItem is the item of a snapshot resource: its revision needs no
// recording, since the snapshot read already went through the Backend.
func snapshotItem(res *pbresource.Resource) item { return item{ev: eventq.Upsert(res)} }

// watch is the etcd storage.Watch: run translates the etcd watch's events
// and pushes them to buf, from which Next hands them out.
type watch struct {
	b         *Backend
	q         query
	buf       *eventq.Queue[item]
	stopped   chan struct{}          // closed when run returns
	first     *pbresource.WatchEvent // handed out before anything else, if not nil
	firstOnce sync.Once
}

var _ storage.Watch = (*watch)(nil)

// run forwards the etcd watch's events from revision from on until the
// watch ends.
func (w *watch) run(ctx context.Context, from int64) {
	defer close(w.stopped)
	defer func() {
		w.b.watchMu.Lock()
		delete(w.b.watches, w)
		w.b.watchMu.Unlock()
	}()
	bo := retry.NewBackOff(50*time.Millisecond, 2*time.Second,
		backoff.WithRandomizationFactor(backoff.DefaultRandomizationFactor),
		backoff.WithMaxElapsedTime(watchRetryTimeout))

	for {
		var err error
		from, err = w.follow(ctx, from, bo)
		if ctx.Err() != nil || err == nil {
			return // closed, or ended by follow
		}
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			w.buf.End(fmt.Errorf("%w (needed revision %d): %w", ErrCompacted, from, err))
			return
		case errors.Is(err, rpctypes.ErrFutureRev):
			w.buf.End(fmt.Errorf("etcd: watch from revision %d: %w", from, err))
			return
		case w.b.client.Ctx().Err() != nil:
			w.buf.End(fmt.Errorf("etcd: watch ended: the etcd client was closed: %w", err))
			return
		}
		delay := bo.NextBackOff()
		if delay == backoff.Stop {
			w.buf.End(fmt.Errorf("%w: etcd watch: giving up after %s of retries: %w", storage.ErrInconsistent, watchRetryTimeout, err))
			return
		}
		w.b.logger.Warn("etcd watch interrupted, resuming", "range", w.q.rangePrefix, "from", from, "after", delay, "error", err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
	}
}

// follow runs one etcd watch from revision from. It returns the revision
// to resume from and why the etcd watch stopped; a nil error means the
// watch has ended (consumer too slow, or a bad event) and must not be
// resumed.
func (w *watch) follow(ctx context.Context, from int64, bo backoff.BackOff) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := w.b.client.Watch(wctx, w.q.rangePrefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV())
	defer func() {
		// Let the client wind the watch down without waiting for it: cut
		// off from etcd, it may take a while to close the channel.
		cancel()
		go func() {
			for range wch {
			}
		}()
	}()
	var items []item
	for {
		var resp clientv3.WatchResponse
		var open bool
		select {
		case resp, open = <-wch:
		case <-ctx.Done():
			// Closed. Do not wait for the channel: cut off from etcd, the
			// client closes it only once it has reconnected.
			return from, ctx.Err()
		}
		if !open {
			break
		}
		if err := resp.Err(); err != nil {
			return from, err
		}
		items = items[:0]
		for _, ev := range resp.Events {
			it, ok, err := w.translate(ev)
			if err != nil {
				w.buf.End(err)
				return from, nil
			}
			if ok {
				items = append(items, it)
			}
		}
		// One hand-over per response: a consumer waiting in Next wakes
		// once for all of it.
		if len(items) > 0 {
			running, endedNow := w.buf.TryPush(items...)
			if endedNow {
				w.b.dropped.Add(1)
			}
			if !running {
				return from, nil
			}
		}
		clear(items)
		if n := len(resp.Events); n > 0 {
			// Every event of a revision arrives in one response, so the
			// next revision is where a resumed watch starts.
			from = resp.Events[n-1].Kv.ModRevision + 1
		}
		bo.Reset()
	}
	if err := ctx.Err(); err != nil {
		return from, err
	}
	return from, errors.New("etcd: the watch channel closed")
}

// translate turns an etcd event into a watch event, ok false when the
// query does not select its key.
func (w *watch) translate(ev *clientv3.Event) (item, bool, error) {
	kv := ev.Kv
	if !w.q.exact {
		tk, ok := w.q.split(kv.Key)
		if !ok || !w.q.matches(tk) {
			return item{}, false, nil
		}
	}
	switch ev.Type {
	case mvccpb.PUT:
		res, err := decode(kv)
		if err != nil {
			return item{}, false, err
		}
		return item{ev: eventq.NewEvent(res, false, ""), rev: kv.ModRevision}, true, nil
	case mvccpb.DELETE:
		if ev.PrevKv == nil {
			return item{}, false, fmt.Errorf("%w: key %q at revision %d", errNoPrevKV, kv.Key, kv.ModRevision)
		}
		res, err := decode(ev.PrevKv)
		if err != nil {
			return item{}, false, err
		}
		return item{ev: eventq.NewEvent(res, true, strconv.FormatInt(kv.ModRevision, 10)), rev: kv.ModRevision}, true, nil
	}
	return item{}, false, fmt.Errorf("etcd: unknown event type %v", ev.Type)
}

// Next returns the snapshot's Upserts, then EndOfSnapshot, then the
// changes in commit order. After the watch ended it returns why:
// storage.ErrWatchClosed, storage.ErrWatchTooSlow, an error wrapping
// ErrCompacted, or another etcd error. The events are the caller's to
// read, shared with nobody else.
func (w *watch) Next(ctx context.Context) (*pbresource.WatchEvent, error) {
	if w.first != nil {
		var first *pbresource.WatchEvent
		w.firstOnce.Do(func() { first = w.first })
		if first != nil {
			return first, nil
		}
	}
	it, err := w.buf.Next(ctx)
	if err != nil {
		return nil, err
	}
	if it.rev > 0 {
		// Reads after this event must not be older than it.
		w.b.observe(it.rev)
	}
	return it.ev, nil
}

// Close ends the watch and waits until its etcd watch is released. Later
// calls to Next, and one blocked in Next, return storage.ErrWatchClosed.
func (w *watch) Close() {
	w.buf.Close()
	<-w.stopped
}

// WatchStats counts the watches now: those whose etcd watch still runs,
// the changes they hold for their consumers, and the watches ended for
// falling behind. It takes each watch's queue locks in turn: it is meant
// for a metrics scrape; watches pay for it only a map insert and delete
// when they start and end.
func (b *Backend) WatchStats() storage.WatchStats {
	b.watchMu.Lock()
	ws := make([]*watch, 0, len(b.watches))
	for w := range b.watches {
		ws = append(ws, w)
	}
	b.watchMu.Unlock()
	s := storage.WatchStats{Open: len(ws), Dropped: b.dropped.Load()}
	for _, w := range ws {
		s.Buffered += w.buf.Buffered()
	}
	return s
}
