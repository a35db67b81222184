package etcd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
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
	q, err := b.keys.query(resType, tenancy, namePrefix)
	if err != nil {
		return nil, err
	}
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
	return b.watchFrom(q, snap, rev+1), nil
}

// watchFrom starts a watch that hands out snap, then EndOfSnapshot, then
// the changes from revision from on.
func (b *Backend) watchFrom(q query, snap []*pbresource.Resource, from int64) *watch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &watch{
		b:        b,
		q:        q,
		limit:    b.watchBuffer,
		cancel:   cancel,
		notify:   make(chan struct{}, 1),
		done:     make(chan struct{}),
		stopped:  make(chan struct{}),
		snapshot: snap,
	}
	go w.run(ctx, from)
	return w
}

// item is an event and the revision of the change it reports.
type item struct {
	ev  *pbresource.WatchEvent
	rev int64
}

// watch is the etcd storage.Watch. run fills pending; Next swaps pending
// with its own batch when the batch is used up (one lock round per batch,
// like the inmem backend's watch).
type watch struct {
	b      *Backend
	q      query
	limit  int
	cancel context.CancelFunc

	notify  chan struct{} // capacity 1: wakes a waiting Next
	done    chan struct{} // closed when the watch ends
	stopped chan struct{} // closed when run returns
	ended   atomic.Bool   // set, under mu, with err

	// Consumer side, under nextMu.
	nextMu   sync.Mutex
	snapshot []*pbresource.Resource
	sentEOS  bool
	batch    []item
	pos      int

	// Producer side, under mu.
	mu      sync.Mutex
	pending []item
	waiting bool
	err     error
}

var _ storage.Watch = (*watch)(nil)

// run forwards the etcd watch's events from revision from on until the
// watch ends.
func (w *watch) run(ctx context.Context, from int64) {
	defer close(w.stopped)
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = 50 * time.Millisecond
	bo.MaxInterval = 2 * time.Second
	bo.MaxElapsedTime = watchRetryTimeout
	bo.Reset()

	for {
		var err error
		from, err = w.follow(ctx, from, bo)
		if ctx.Err() != nil || err == nil {
			return // closed, or ended by follow
		}
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			w.end(fmt.Errorf("%w (needed revision %d): %w", ErrCompacted, from, err))
			return
		case errors.Is(err, rpctypes.ErrFutureRev):
			w.end(fmt.Errorf("etcd: watch from revision %d: %w", from, err))
			return
		case w.b.client.Ctx().Err() != nil:
			w.end(fmt.Errorf("etcd: watch ended: the etcd client was closed: %w", err))
			return
		}
		delay := bo.NextBackOff()
		if delay == backoff.Stop {
			w.end(fmt.Errorf("%w: etcd watch: giving up after %s of retries: %w", storage.ErrInconsistent, watchRetryTimeout, err))
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
				w.end(err)
				return from, nil
			}
			if ok {
				items = append(items, it)
			}
		}
		// One hand-over per response: a consumer waiting in Next wakes
		// once for all of it.
		if len(items) > 0 && !w.push(items) {
			return from, nil
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
		return item{ev: newEvent(res, false), rev: kv.ModRevision}, true, nil
	case mvccpb.DELETE:
		if ev.PrevKv == nil {
			return item{}, false, fmt.Errorf("%w: key %q at revision %d", errNoPrevKV, kv.Key, kv.ModRevision)
		}
		res, err := decode(ev.PrevKv)
		if err != nil {
			return item{}, false, err
		}
		return item{ev: newEvent(res, true), rev: kv.ModRevision}, true, nil
	}
	return item{}, false, fmt.Errorf("etcd: unknown event type %v", ev.Type)
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

// push buffers items for the consumer, or ends the watch with
// storage.ErrWatchTooSlow when they do not fit in the buffer. It reports
// whether the watch goes on.
func (w *watch) push(items []item) bool {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return false
	}
	if len(w.pending)+len(items) > w.limit {
		w.endLocked(storage.ErrWatchTooSlow)
		w.mu.Unlock()
		return false
	}
	w.pending = append(w.pending, items...)
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

// end ends the watch with err (unless it already ended).
func (w *watch) end(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.endLocked(err)
	}
	w.mu.Unlock()
}

// endLocked records err, drops the buffered events, wakes Next and stops
// the etcd watch. The caller holds mu.
func (w *watch) endLocked(err error) {
	if w.err == nil {
		close(w.done)
	}
	w.err = err
	w.ended.Store(true)
	w.pending = nil
	w.cancel()
}

// Next returns the snapshot's Upserts, then EndOfSnapshot, then the
// changes in commit order. After the watch ended it returns why:
// storage.ErrWatchClosed, storage.ErrWatchTooSlow, an error wrapping
// ErrCompacted, or another etcd error. The events are the caller's to
// read, shared with nobody else.
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
			it := w.batch[w.pos]
			w.batch[w.pos] = item{}
			w.pos++
			w.nextMu.Unlock()
			// Reads after this event must not be older than it.
			w.b.observe(it.rev)
			return it.ev, nil
		}

		w.mu.Lock()
		if w.err != nil {
			w.mu.Unlock()
			continue // reported at the top of the loop
		}
		if len(w.pending) > 0 {
			spare := w.batch[:0]
			if cap(spare) > 1024 && cap(spare) > 4*len(w.pending) {
				spare = nil // let a burst's buffer go
			}
			w.batch, w.pending = w.pending, spare
			w.pos = 0
			w.mu.Unlock()
			continue
		}
		w.waiting = true
		w.mu.Unlock()

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

// Close ends the watch and waits until its etcd watch is released. Later
// calls to Next, and one blocked in Next, return storage.ErrWatchClosed.
func (w *watch) Close() {
	w.mu.Lock()
	if w.err != storage.ErrWatchClosed {
		w.endLocked(storage.ErrWatchClosed)
	}
	w.mu.Unlock()
	<-w.stopped
}
