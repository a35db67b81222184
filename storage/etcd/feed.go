package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"

	"github.com/loomrt/loom/internal/retry"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/internal/eventq"
)

// feed is a Backend's change feed: one etcd watch over every resource key
// of the backend, with previous values, whose events are decoded once into
// a ring of recent entries that the backend's watches read as cursors.
// Entries and their events are immutable once appended and shared by every
// watch. The ring is bounded in entries and estimated bytes; a watch whose
// cursor falls off it ends with storage.ErrWatchTooSlow. The feed's etcd
// watch runs on a gRPC stream of its own (its context carries metadata no
// other watch has), so etcd's progress notifications on it say that every
// event up to their revision has arrived (see known).
//
// The feed never waits for a watch: its goroutine appends and moves on.
type feed struct {
	b      *Backend
	key    string // the stream's metadata value, unique per feed
	cancel context.CancelFunc
	// stopped is closed when run returns.
	stopped chan struct{}
	// start is the first revision the feed's etcd watch asked for.
	start int64
	// users counts the watches attached to the feed, under b.feedMu.
	users int

	// progressReq asks run for a progress notification (capacity 1).
	progressReq chan struct{}

	mu    sync.RWMutex
	ring  []*feedEntry // len is a power of two
	mask  uint64
	head  uint64 // sequence number of the next entry
	tail  uint64 // sequence number of the oldest entry retained
	bytes int64  // estimated bytes the retained entries keep alive
	// maxBytes bounds bytes; the newest entry is always kept.
	maxBytes int64
	// floor: the ring holds every event with a revision above it (or will,
	// once the feed has received it).
	floor int64
	// known: every event up to it has been appended (from the events
	// themselves and from progress notifications).
	known int64
	types map[storage.UnversionedType]*typeFeed
	// err is why the feed ended, nil while it runs; failed is closed then.
	err    error
	failed chan struct{}
	// appended counts appends since the last reap; reaping is set while a
	// reap runs.
	appended int
	reaping  atomic.Bool
	// counter, when set (by the first Stats call), is given every entry
	// appended (counts.go).
	counter *counter
}

// feedEntry is one change: a resource put or deleted at rev.
type feedEntry struct {
	seq  uint64
	rev  int64
	typ  storage.UnversionedType
	tk   tenancyKey
	ev   *pbresource.WatchEvent
	size int64
	// delta is what the change adds to the counts (counts.go).
	delta delta
}

// typeFeed is what the feed keeps per type: the latest of the type's
// entries dropped from the ring, and the wake-up of the watches waiting for
// the type's next entry. Under feed.mu.
type typeFeed struct {
	// droppedSeq is one more than the sequence number of the type's latest
	// dropped entry (0: none), droppedRev that entry's revision.
	droppedSeq uint64
	droppedRev int64
	wake       chan struct{} // closed by the type's next entry; nil if nobody waits
}

// feedEntryOverhead estimates, in bytes, what an entry keeps alive beyond
// its etcd key and value (the decoded resource's strings and data share
// the value): the entry, its event's messages and the fixed part of the
// resource's messages.
const feedEntryOverhead = 768

// feedSeq numbers feeds, so that each one's etcd watch has a gRPC stream
// of its own.
var feedSeq atomic.Int64

// feedReapEvery is how many appends apart the feed starts a reap.
const feedReapEvery = 1024

// feedProgressEvery is the shortest interval between two progress
// requests of the feed.
const feedProgressEvery = 50 * time.Millisecond

func newFeed(b *Backend, start int64) *feed {
	n := 1
	for n < b.logEvents {
		n <<= 1
	}
	return &feed{
		b:           b,
		key:         "feed-" + strconv.FormatInt(feedSeq.Add(1), 10),
		stopped:     make(chan struct{}),
		start:       start,
		progressReq: make(chan struct{}, 1),
		ring:        make([]*feedEntry, n),
		mask:        uint64(n - 1),
		maxBytes:    b.logBytes,
		floor:       start - 1,
		known:       start - 1,
		types:       make(map[storage.UnversionedType]*typeFeed),
		failed:      make(chan struct{}),
	}
}

// attach returns the backend's feed, started at revision start if none
// runs, and counts the caller as its user until detach.
func (b *Backend) attach(start int64) *feed {
	b.feedMu.Lock()
	defer b.feedMu.Unlock()
	if f := b.feed; f != nil {
		select {
		case <-f.failed:
		default:
			f.users++
			return f
		}
	}
	f := newFeed(b, start)
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	f.users = 1
	b.feed = f
	go f.run(ctx)
	return f
}

// detach ends a user of f; the last one stops it (a later watch starts a
// new feed).
func (b *Backend) detach(f *feed) {
	b.feedMu.Lock()
	f.users--
	last := f.users == 0
	if last && b.feed == f {
		b.feed = nil
	}
	b.feedMu.Unlock()
	if last {
		f.cancel()
		<-f.stopped
	}
}

// streamContext returns ctx with the metadata that puts an etcd watch on
// the gRPC stream named key, and requires a leader.
func streamContext(ctx context.Context, key string) context.Context {
	return metadata.AppendToOutgoingContext(clientv3.WithRequireLeader(ctx), "loom-watch-stream", key)
}

// run follows the etcd watch from f.start until ctx ends or the feed
// fails. Transient errors (no leader, member unreachable) re-establish the
// etcd watch from the revision after the last event received, with
// exponential backoff, for up to watchRetryTimeout; then, and on etcd
// compaction of revisions the feed still needs, the feed fails and every
// watch reading it ends with the error.
func (f *feed) run(ctx context.Context) {
	defer close(f.stopped)
	bo := retry.NewBackOff(50*time.Millisecond, 2*time.Second,
		backoff.WithRandomizationFactor(backoff.DefaultRandomizationFactor),
		backoff.WithMaxElapsedTime(watchRetryTimeout))
	from := f.start
	for {
		var err error
		from, err = f.follow(ctx, from, bo)
		if ctx.Err() != nil {
			f.fail(storage.ErrWatchClosed)
			return
		}
		if err == nil {
			return // failed in follow
		}
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			f.fail(fmt.Errorf("%w (needed revision %d): %w", ErrCompacted, from, err))
			return
		case errors.Is(err, rpctypes.ErrFutureRev):
			f.fail(fmt.Errorf("etcd: watch from revision %d: %w", from, err))
			return
		case f.b.client.Ctx().Err() != nil:
			f.fail(fmt.Errorf("etcd: watch ended: the etcd client was closed: %w", err))
			return
		}
		delay := bo.NextBackOff()
		if delay == backoff.Stop {
			f.fail(fmt.Errorf("%w: etcd watch: giving up after %s of retries: %w", storage.ErrInconsistent, watchRetryTimeout, err))
			return
		}
		f.b.logger.Warn("etcd watch interrupted, resuming", "prefix", f.b.keys.prefix+resourceDir, "from", from, "after", delay, "error", err)
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			f.fail(storage.ErrWatchClosed)
			return
		}
	}
}

// follow runs one etcd watch from revision from. It returns the revision
// to resume from and why the etcd watch stopped; a nil error means the
// feed has failed (a bad event) and must not be resumed.
func (f *feed) follow(ctx context.Context, from int64, bo backoff.BackOff) (int64, error) {
	wctx, cancel := context.WithCancel(streamContext(ctx, f.key))
	defer cancel()
	wch := f.b.client.Watch(wctx, f.b.keys.prefix+resourceDir, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV())
	defer func() {
		// Let the client wind the watch down without waiting for it: cut
		// off from etcd, it may take a while to close the channel.
		cancel()
		go func() {
			for range wch {
			}
		}()
	}()
	var (
		batch        []*feedEntry
		lastProgress time.Time
	)
	for {
		var resp clientv3.WatchResponse
		var open bool
		select {
		case resp, open = <-wch:
		case <-f.progressReq:
			if time.Since(lastProgress) >= feedProgressEvery {
				lastProgress = time.Now()
				// Ignored by etcd while the watch replays history; asked
				// again by the next watch that wants a bookmark.
				_ = f.b.client.RequestProgress(wctx)
			}
			continue
		case <-ctx.Done():
			return from, ctx.Err()
		}
		if !open {
			break
		}
		if err := resp.Err(); err != nil {
			return from, err
		}
		if resp.IsProgressNotify() {
			f.advance(resp.Header.Revision)
			continue
		}
		batch = batch[:0]
		// One response's resources share equal Types, Tenancies and
		// metadata maps (immutable, as everything stored).
		var d rangeDecoder
		for _, ev := range resp.Events {
			e, ok, err := f.translate(&d, ev)
			if err != nil {
				f.fail(err)
				return from, nil
			}
			if ok {
				batch = append(batch, e)
			}
		}
		if n := len(resp.Events); n > 0 {
			// Every event of a revision arrives in one response, so the
			// next revision is where a resumed watch starts.
			last := resp.Events[n-1].Kv.ModRevision
			f.append(batch, last)
			from = last + 1
		}
		clear(batch)
		bo.Reset()
	}
	if err := ctx.Err(); err != nil {
		return from, err
	}
	return from, errors.New("etcd: the watch channel closed")
}

// translate decodes an etcd event of a resource key into an entry; ok is
// false for a key that is not a resource's.
func (f *feed) translate(d *rangeDecoder, ev *clientv3.Event) (*feedEntry, bool, error) {
	kv := ev.Kv
	typ, tk, ok := f.b.keys.splitResource(kv.Key)
	if !ok {
		return nil, false, nil
	}
	e := &feedEntry{rev: kv.ModRevision, typ: typ, tk: tk}
	switch ev.Type {
	case mvccpb.PUT:
		res, err := decodeWith(d, kv)
		if err != nil {
			return nil, false, err
		}
		e.ev = eventq.NewEvent(res, false, "")
		e.delta = deltaOf(ev, res)
		e.size = int64(len(kv.Key)+len(kv.Value)) + feedEntryOverhead
	case mvccpb.DELETE:
		if ev.PrevKv == nil {
			return nil, false, fmt.Errorf("%w: key %q at revision %d", errNoPrevKV, kv.Key, kv.ModRevision)
		}
		res, err := decodeWith(d, ev.PrevKv)
		if err != nil {
			return nil, false, err
		}
		e.ev = eventq.NewEvent(res, true, strconv.FormatInt(kv.ModRevision, 10))
		e.delta = deltaOf(ev, res)
		e.size = int64(len(kv.Key)+len(ev.PrevKv.Value)) + feedEntryOverhead
	default:
		return nil, false, fmt.Errorf("etcd: unknown event type %v", ev.Type)
	}
	return e, true, nil
}

// append publishes the entries of one etcd response, whose last event is
// at revision last, dropping the oldest entries beyond the ring's bounds,
// and wakes the watches waiting for their types.
func (f *feed) append(batch []*feedEntry, last int64) {
	f.mu.Lock()
	var woken []*typeFeed
	for _, e := range batch {
		if f.head-f.tail >= uint64(len(f.ring)) {
			f.dropOldest()
		}
		e.seq = f.head
		f.ring[e.seq&f.mask] = e
		f.head++
		f.bytes += e.size
		for f.bytes > f.maxBytes && f.tail < e.seq {
			f.dropOldest()
		}
		tf := f.typeFeed(e.typ)
		if tf.wake != nil {
			woken = append(woken, tf)
		}
	}
	f.known = max(f.known, last)
	if f.counter != nil {
		f.counter.add(batch)
	}
	for _, tf := range woken {
		if tf.wake != nil {
			close(tf.wake)
			tf.wake = nil
		}
	}
	f.appended += len(batch)
	reap := f.appended >= feedReapEvery && f.tail > 0
	if reap {
		f.appended = 0
	}
	f.mu.Unlock()
	if reap && f.reaping.CompareAndSwap(false, true) {
		go f.b.reap(f)
	}
}

// dropOldest drops the ring's oldest entry. The caller holds mu.
func (f *feed) dropOldest() {
	s := &f.ring[f.tail&f.mask]
	e := *s
	*s = nil
	f.bytes -= e.size
	tf := f.typeFeed(e.typ)
	tf.droppedSeq, tf.droppedRev = e.seq+1, e.rev
	f.floor = e.rev
	f.tail++
}

// typeFeed returns typ's, made if needed. The caller holds mu.
func (f *feed) typeFeed(typ storage.UnversionedType) *typeFeed {
	tf := f.types[typ]
	if tf == nil {
		tf = new(typeFeed)
		f.types[typ] = tf
	}
	return tf
}

// advance records a progress notification at rev: every event up to rev
// has been appended.
func (f *feed) advance(rev int64) {
	f.mu.Lock()
	f.known = max(f.known, rev)
	f.mu.Unlock()
}

// requestProgress asks for a progress notification, without waiting.
func (f *feed) requestProgress() {
	select {
	case f.progressReq <- struct{}{}:
	default:
	}
}

// fail ends the feed with err (unless it has ended already) and wakes
// every watch.
func (f *feed) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return
	}
	f.err = err
	close(f.failed)
	for _, tf := range f.types {
		if tf.wake != nil {
			close(tf.wake)
			tf.wake = nil
		}
	}
}

// wait returns a channel closed by typ's next entry.
func (f *feed) wait(typ storage.UnversionedType) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	tf := f.typeFeed(typ)
	if tf.wake == nil {
		tf.wake = make(chan struct{})
	}
	return tf.wake
}

// position returns where a watch of typ that has every change up to
// revision after starts reading the ring: the sequence number of its first
// entry after that revision (or the head), and the revision up to which
// the watch then has every change (after, or more if it skips entries of
// other types the ring has dropped). ok is false when the ring lacks
// changes of the type after after: the watch must catch up from etcd's
// history first. The caller holds mu (read).
func (f *feed) position(typ storage.UnversionedType, after int64) (pos uint64, have int64, ok bool) {
	if after >= f.floor {
		lo, hi := f.tail, f.head
		for lo < hi {
			mid := lo + (hi-lo)/2
			if f.ring[mid&f.mask].rev > after {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		return lo, after, true
	}
	if after < f.start-1 {
		return 0, 0, false // before anything the feed has seen
	}
	if tf := f.types[typ]; tf != nil && tf.droppedRev > after {
		return 0, 0, false
	}
	return f.tail, f.floor, true
}

// splitResource returns the type and tenancy of a resource key of the
// backend, ok false for another key.
func (k keys) splitResource(key []byte) (storage.UnversionedType, tenancyKey, bool) {
	rest, ok := strings.CutPrefix(string(key), k.prefix+resourceDir)
	if !ok {
		return storage.UnversionedType{}, tenancyKey{}, false
	}
	var seg [4]string
	for i := range seg {
		var found bool
		seg[i], rest, found = strings.Cut(rest, "/")
		if !found {
			return storage.UnversionedType{}, tenancyKey{}, false
		}
	}
	if strings.IndexByte(rest, '/') >= 0 {
		return storage.UnversionedType{}, tenancyKey{}, false
	}
	return storage.UnversionedType{Group: seg[0], Kind: seg[1]},
		tenancyKey{partition: seg[2], namespace: seg[3], name: rest}, true
}
