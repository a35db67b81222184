package inmem

import (
	"strconv"
	"sync/atomic"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// eventLog is the store's change feed: the latest changes of every type, one
// entry per revision, in a ring that watches read as cursors. Entries and
// their events are immutable once published and shared by every watch.
//
// The writer (holding the store lock exclusively) fills the slot of the
// next revision, then publishes it by advancing next; readers need no lock:
// a reader at revision r loads next, and if r < next loads r's slot. A slot
// that is empty or holds another revision means r has been dropped from the
// log (by the count or byte bound) and the reader has fallen behind.
type eventLog struct {
	slots []atomic.Pointer[logEntry] // len is a power of two
	mask  uint64

	// next is the revision the next entry will have: entries below it are
	// published.
	next atomic.Uint64
	// tail is the oldest revision still in the log. Only the writer
	// changes it; readers load it to decide about gaps.
	tail atomic.Uint64

	// Writer side, under the store lock.
	bytes    int64 // sum of the sizes of the retained entries
	maxBytes int64
}

// logEntry is one change: the resource written or deleted at rev, and its
// event.
//
// Its type and key are those of res (its feed's type, resource.NameKeyOf(res.Id)),
// not copies: an entry of 48 bytes instead of 128, which with its event's
// messages takes the 160-byte size class instead of 240, for every change
// the log keeps.
type logEntry struct {
	rev  uint64
	feed *feed                // the type's
	res  *pbresource.Resource // the resource written, or deleted
	size int64                // estimated bytes the entry keeps alive
	ev   *pbresource.WatchEvent
	// prev is what was stored under key before the change (nil if
	// nothing): ListPage undoes the change with it. It is the resource the
	// change replaced, which the type's previous entry holds too while it
	// is in the log, so it costs memory of its own only after that entry
	// is dropped, and never longer than this entry is retained.
	prev *pbresource.Resource
}

// entryOverhead estimates, in bytes, what a log entry costs beyond sizeOf
// its resource: the entry, the event's three messages, and the fixed part
// of the resource's messages (a resource of 234 bytes on the wire, 205 by
// sizeOf, replaced by an update, keeps about 1 KB alive with its entry;
// BenchmarkIdleWatchers).
const entryOverhead = 768

// newEventLog returns an empty log whose first entry will be at revision
// first.
func newEventLog(count int, maxBytes int64, first uint64) *eventLog {
	n := 1
	for n < count {
		n <<= 1
	}
	l := &eventLog{
		slots:    make([]atomic.Pointer[logEntry], n),
		mask:     uint64(n - 1),
		maxBytes: maxBytes,
	}
	l.next.Store(first)
	l.tail.Store(first)
	return l
}

// append publishes e, whose rev is next, dropping the oldest entries beyond
// the log's bounds (always keeping e). The caller holds the store lock
// exclusively.
func (l *eventLog) append(e *logEntry) {
	if e.rev-l.tail.Load() >= uint64(len(l.slots)) {
		l.dropOldest()
	}
	l.slots[e.rev&l.mask].Store(e)
	l.bytes += e.size
	for l.bytes > l.maxBytes && l.tail.Load() < e.rev {
		l.dropOldest()
	}
	l.next.Store(e.rev + 1)
}

func (l *eventLog) dropOldest() {
	t := l.tail.Load()
	s := &l.slots[t&l.mask]
	if old := s.Load(); old != nil && old.rev == t {
		l.bytes -= old.size
		old.feed.dropped.Store(t)
	}
	s.Store(nil)
	// After dropped: a reader that loads the tail first sees every drop
	// below it (watch.skipGap).
	l.tail.Store(t + 1)
}

// entry returns the entry of rev, or nil if it is no longer in the log. rev
// must be below next.
func (l *eventLog) entry(rev uint64) *logEntry {
	e := l.slots[rev&l.mask].Load()
	if e == nil || e.rev != rev {
		return nil
	}
	return e
}

// feed is what the log keeps per type: the revision of the type's latest
// entry dropped from the log, and the wake-up of the watches waiting for the
// type's next entry.
type feed struct {
	typ     storage.UnversionedType
	dropped atomic.Uint64
	gen     atomic.Pointer[chan struct{}]
}

// wake wakes every watch waiting on the type. Writers pay one atomic load
// when nobody waits.
func (f *feed) wake() {
	if p := f.gen.Load(); p != nil && f.gen.CompareAndSwap(p, nil) {
		close(*p)
	}
}

// wait returns a channel closed by the type's next entry (a watch checks
// the log once more after taking it, so an entry published meanwhile is not
// missed).
func (f *feed) wait() <-chan struct{} {
	for {
		if p := f.gen.Load(); p != nil {
			return *p
		}
		c := make(chan struct{})
		if f.gen.CompareAndSwap(nil, &c) {
			return c
		}
	}
}

// upsertEntry and deleteEntry hold an entry and the messages of its event,
// so that logging a change costs one allocation.
type upsertEntry struct {
	logEntry
	ev     pbresource.WatchEvent
	oneof  pbresource.WatchEvent_Upsert_
	upsert pbresource.WatchEvent_Upsert
}

type deleteEntry struct {
	logEntry
	ev     pbresource.WatchEvent
	oneof  pbresource.WatchEvent_Delete_
	delete pbresource.WatchEvent_Delete
}

// key returns the key of the entry's resource.
func (e *logEntry) key() resource.NameKey { return resource.NameKeyOf(e.res.Id) }

// newEntry returns the entry of a change at rev: an Upsert of res, or a
// Delete (carrying rev as its version) when deleted; prev is what the change
// replaced (for a Delete, res itself).
func newEntry(rev uint64, f *feed, res, prev *pbresource.Resource, size int64, deleted bool) *logEntry {
	if deleted {
		b := new(deleteEntry)
		b.delete.Resource = res
		b.delete.Version = strconv.FormatUint(rev, 10)
		b.oneof.Delete = &b.delete
		b.ev.Event = &b.oneof
		b.logEntry = logEntry{rev: rev, feed: f, res: res, size: size + entryOverhead, ev: &b.ev, prev: prev}
		return &b.logEntry
	}
	b := new(upsertEntry)
	b.upsert.Resource = res
	b.oneof.Upsert = &b.upsert
	b.ev.Event = &b.oneof
	b.logEntry = logEntry{rev: rev, feed: f, res: res, size: size + entryOverhead, ev: &b.ev, prev: prev}
	return &b.logEntry
}

// sizeOf estimates the bytes res holds in its variable-length fields (the
// strings, data, metadata and statuses); entryOverhead covers the fixed
// part. It is far cheaper than proto.Size, and the log's byte bound needs no
// more than an estimate.
func sizeOf(res *pbresource.Resource) int64 {
	n := len(res.Version) + len(res.Generation)
	if id := res.Id; id != nil {
		n += len(id.Name) + len(id.Uid)
	}
	if o := res.Owner; o != nil {
		n += 128 + len(o.Name) + len(o.Uid)
	}
	if d := res.Data; d != nil {
		n += len(d.TypeUrl) + len(d.Value)
	}
	for k, v := range res.Metadata {
		n += 32 + len(k) + len(v)
	}
	for k, st := range res.Status {
		n += 96 + len(k) + len(st.GetObservedGeneration())
		for _, c := range st.GetConditions() {
			n += 96 + len(c.Type) + len(c.Reason) + len(c.Message)
			if r := c.Resource; r != nil {
				n += 96 + len(r.Name)
			}
		}
	}
	return int64(n)
}
