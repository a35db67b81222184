// Package inmem is Loom's default storage backend: a versioned store kept in
// the memory of one process, with WatchList fan-out. It needs no set-up and
// starts no goroutines; create one with New and hand it to the server.
//
// # How it works
//
// One read-write lock guards the whole store. Writes take it exclusively,
// bump a store-wide revision counter (rendered as the resource Version,
// which starts at the wall clock in nanoseconds: see firstRevision),
// update the indexes and hand the change to every matching watch while still
// holding the lock, so each watch sees changes in commit order. Reads share
// the lock and return the stored messages themselves, without copying: per
// the ownership rule (see the resource package doc), what a Backend returns
// is read-only. A write copies its input once and stores that copy, sharing
// what the input took over unchanged from the resource it replaces
// (resource.CloneSharing): a status write copies the new status only, and
// WriteStatusCAS (storage.StatusWriter) builds it from the stored resource
// and the status it is handed, copying neither. A new resource's ID shares
// its Type and Tenancy with the latest resource of its type stored, when
// they are equal (resource.CloneSharingID).
//
// Resources are indexed by type (Group and Kind), then by partition,
// namespace and name. Each type keeps its keys in a sorted slice for List;
// new keys are collected unsorted and merged into the slice lazily, so a
// create costs O(1) and a List costs O(n) plus the sort of what arrived since
// the previous List. A second index maps an owner's ID (with Uid) to the
// resources it owns, for OwnerReferences.
//
// # Watches
//
// Every change goes into one event log shared by all watches: a ring of
// immutable entries, one per revision, each holding the change's event,
// which every watch it matches hands out as it is. Writers append under the
// store lock in O(1), whatever the number of watches, and wake only the
// watches of the changed type that wait; they never wait for a watch. A
// watch is a cursor into the log (a revision) plus its filter: it reads the
// log without locks and skips what does not match, so it holds no events of
// its own. The log keeps the latest changes within a count and a byte bound
// (WithWatchLogEvents, WithWatchLogBytes); a watch whose next change was
// dropped before it read it ends with storage.ErrWatchTooSlow. A watch of a
// type whose changes were not dropped (only other types' were) just skips
// the gap.
//
// WatchList takes its snapshot and places the cursor under the store lock,
// so no change falls between the snapshot and the first delta, and none is
// reported twice. WatchListSince places the cursor after a version instead
// (storage.ResumableBackend) when the log still has every change of the
// type since, and sends bookmarks (the cursor's revision) to an idle watch.
// A watch that has stalled is ended by a reap that writers start every 1,024
// changes in a goroutine of its own, so it lets go of a snapshot it has not
// handed out without waiting for its consumer.
//
// ListPage (storage.PagedLister) serves pages of a listing at the version of
// its first page by undoing, with the log, the changes made since: each log
// entry keeps the resource its change replaced. A listing whose version has
// left the log gets storage.ErrVersionGone. ListOwnedPage
// (storage.OwnerPagedLister) does the same for an owner's resources, from
// the owner index.
//
// WatchStats counts the open watches, how far behind they are and how many
// were dropped, for metrics; it is read when asked.
//
// # History
//
// The store keeps history (storage.Historian) unless New is given
// WithoutHistory, within storage.DefaultHistoryLimits unless given
// WithHistory. A write that changes the Generation and a deletion record a
// revision under the store lock, as part of the write; the revision shares
// the stored message. Pruning to the limits runs inline in amortized O(1)
// steps, never a scan: see history.
//
// # Fences
//
// The store ignores fences (storage.WithFence): it lives in one process,
// which is its only writer and always its own leader, so there is no other
// term to fence off.
package inmem

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
	"github.com/loomrt/loom/storage"
)

// DefaultWatchLogEvents is how many changes the event log keeps, unless New
// is given WithWatchLogEvents: how far (in changes of any type) a watch may
// fall behind before it is ended with storage.ErrWatchTooSlow, and how far
// back a watch may resume. The log's slots cost 8 bytes each (1 MB); the
// entries keep their events and the resources they replaced alive, within
// DefaultWatchLogBytes, which is the bound that binds first for small
// resources.
const DefaultWatchLogEvents = 131072

// DefaultWatchLogBytes bounds the estimated memory the event log's entries
// keep alive, unless New is given WithWatchLogBytes: 32 MiB, about 33,000
// changes of small resources (about 1 KB each with their entry), so that
// the log and the garbage collector's headroom for it stay well under
// 100 MB of RSS.
const DefaultWatchLogBytes = 32 << 20

// errInvalidID is returned for a resource or ID without a name key the store
// can use (nil ID or nil type).
var errInvalidID = errors.New("inmem: resource id and its type are required")

// Option configures a Backend in New.
type Option func(*Backend)

// WithWatchLogEvents sets how many changes the event log keeps (see
// DefaultWatchLogEvents), rounded up to a power of two. Values below 1 are
// treated as 1.
func WithWatchLogEvents(n int) Option {
	return func(b *Backend) {
		b.logEvents = max(n, 1)
	}
}

// WithWatchLogBytes bounds the estimated bytes the event log's entries keep
// alive (see DefaultWatchLogBytes): the oldest are dropped beyond it. An
// entry is estimated from the lengths of its resource's strings, data,
// metadata and statuses plus a fixed overhead; the newest entry is always
// kept. Values below 1 are treated as 1.
func WithWatchLogBytes(n int64) Option {
	return func(b *Backend) {
		b.logBytes = max(n, 1)
	}
}

// WithWatchBufferSize is WithWatchLogEvents, its name from when each watch
// had a buffer of its own.
func WithWatchBufferSize(n int) Option { return WithWatchLogEvents(n) }

// Backend is an in-memory storage.Backend. It is safe for concurrent use. The
// zero value is not usable; call New.
type Backend struct {
	logEvents int
	logBytes  int64

	// hist keeps the history (history.go), under mu; nil: none.
	hist *history

	// dropped counts the watches ended for falling behind (WatchStats).
	dropped atomic.Uint64
	// reaping is set while a reap runs (see reap).
	reaping atomic.Bool

	// log is the change feed the watches read; writers append to it under
	// mu, watches read it without locks.
	log *eventLog

	// mu guards everything below. Writers hold it exclusively, readers
	// shared.
	mu sync.RWMutex

	// revision is the store-wide revision: the Version of the latest write.
	// It starts at first (see firstRevision), the Version of the empty
	// store.
	revision uint64
	first    uint64

	types map[storage.UnversionedType]*typeIndex
	// lastType and lastTI are the type last written to and its index
	// (typeIndexOf), set under mu exclusively; types are never removed.
	lastType storage.UnversionedType
	lastTI   *typeIndex

	// owned maps an owner (with Uid) to the entries it owns.
	owned map[ownerKey]map[*entry]struct{}

	// watchMu guards feeds and watches against concurrent WatchList and
	// Close calls, which hold mu shared at most. Writers hold mu
	// exclusively and need not take watchMu to read feeds.
	watchMu sync.Mutex
	feeds   map[storage.UnversionedType]*feed
	watches map[*watch]struct{} // the open watches, for WatchStats
}

var (
	_ storage.Backend          = (*Backend)(nil)
	_ storage.ResumableBackend = (*Backend)(nil)
	_ storage.PagedLister      = (*Backend)(nil)
	_ storage.OwnerPagedLister = (*Backend)(nil)
	_ storage.StatusWriter     = (*Backend)(nil)
)

// New returns an empty Backend ready for use.
func New(opts ...Option) *Backend {
	b := &Backend{
		logEvents: DefaultWatchLogEvents,
		logBytes:  DefaultWatchLogBytes,
		types:     make(map[storage.UnversionedType]*typeIndex),
		owned:     make(map[ownerKey]map[*entry]struct{}),
		feeds:     make(map[storage.UnversionedType]*feed),
		watches:   make(map[*watch]struct{}),
		hist:      newHistory(storage.HistoryLimits{}),
	}
	for _, opt := range opts {
		opt(b)
	}
	b.first = firstRevision()
	b.revision = b.first
	b.log = newEventLog(b.logEvents, b.logBytes, b.first+1)
	return b
}

// firstRevision returns the revision a new store starts at: the wall
// clock in nanoseconds since 1970. Versions are not kept across restarts,
// so this is what tells a version or page token of an earlier process
// apart from one of this store: an earlier process started at an earlier
// clock reading t0 and made its versions t0+1, t0+2, ... one per write,
// so its versions stay below the clock for as long as it writes fewer
// than 10^9 times a second; a store behind one lock does a few hundred
// thousand. A version below the start is then one this store never had:
// a watch resuming from it gets a new snapshot and a page token holding
// it is storage.ErrVersionGone. (A version above the store's revision,
// which a wall clock set back between the two processes could give, is
// storage.ErrFutureVersion, as before.) Today's readings are about
// 1.8e18, below 2^63: they fit an int64 until 2262.
func firstRevision() uint64 {
	return uint64(time.Now().UnixNano())
}

// newFeed returns the feed of typ. Every revision up to the store's first
// counts as dropped from it: a watch cannot resume from before the store
// began.
func (b *Backend) newFeed(typ storage.UnversionedType) *feed {
	f := &feed{typ: typ}
	f.dropped.Store(b.first)
	return f
}

func compareKeys(a, b resource.NameKey) int {
	if c := cmp.Compare(a.Partition, b.Partition); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// ownerKey identifies one lifetime of an owner: its type without version,
// its key and its Uid.
type ownerKey struct {
	typ storage.UnversionedType
	key resource.NameKey
	uid string
}

func ownerKeyOf(id *pbresource.ID) ownerKey {
	return ownerKey{typ: storage.UnversionedTypeFrom(id.GetType()), key: resource.NameKeyOf(id), uid: id.GetUid()}
}

// entry is one stored name for the lifetime of a resource: it is created by
// the write that creates the resource and marked removed by its deletion.
//
// It takes 80 bytes, a size class of its own (the history pointer and the
// signature took it from 64); it does not keep sizeOf(res), which a
// deletion recomputes.
type entry struct {
	key resource.NameKey
	// res is the stored message, shared read-only with callers.
	res *pbresource.Resource
	// sig is the signature of res's metadata, for selective listings.
	sig selector.Signature
	// hist is the name's history (history.go), nil when none is kept.
	hist    *nameHistory
	removed bool
}

// Read returns the stored resource under id. It never copies: the result is
// shared and must not be modified. Both consistency levels are served the
// same way, since there is only one copy of the data.
func (b *Backend) Read(_ context.Context, _ storage.ReadConsistency, id *pbresource.ID) (*pbresource.Resource, error) {
	typ := id.GetType()
	if typ == nil {
		return nil, errInvalidID
	}
	b.mu.RLock()
	var res *pbresource.Resource
	if ti := b.typeIndexOf(storage.UnversionedType{Group: typ.Group, Kind: typ.Kind}); ti != nil {
		if e := ti.byKey.get(resource.NameKeyOf(id)); e != nil {
			res = e.res
		}
	}
	b.mu.RUnlock()

	if res == nil || (id.Uid != "" && id.Uid != res.Id.GetUid()) {
		return nil, storage.ErrNotFound
	}
	if gv := res.Id.GetType().GetGroupVersion(); gv != typ.GroupVersion {
		return nil, storage.GroupVersionMismatchError{RequestedType: typ, Stored: res}
	}
	return res, nil
}

// WriteCAS stores a copy of res if res.Version is the stored version (empty:
// the resource must not exist). The stored copy gets the next store-wide
// revision as its Version and is returned; it is shared and must not be
// modified. When res.Id.Uid is empty and the resource exists, the stored Uid
// is kept.
func (b *Backend) WriteCAS(ctx context.Context, res *pbresource.Resource) (*pbresource.Resource, error) {
	if res.GetId().GetType() == nil {
		return nil, errInvalidID
	}
	typ := storage.UnversionedTypeFrom(res.Id.Type)
	key := resource.NameKeyOf(res.Id)

	// Copy outside the lock, so concurrent writers copy in parallel. What
	// res took over from the stored resource it replaces (a status write
	// keeps the ID, data, metadata and other statuses) is immutable and
	// shared, not copied; a stored resource that changed meanwhile only
	// makes the copy share less, and the version check below refuses it.
	prev, like := b.current(typ, key, res.Version != "")
	stored := resource.CloneSharingID(res, prev, like)
	size := sizeOf(stored)

	b.mu.Lock()
	defer b.mu.Unlock()

	ti := b.typeIndexOf(typ)
	var e *entry
	if ti != nil {
		e = ti.byKey.get(key)
	}
	if err := checkWrite(e, stored); err != nil {
		return nil, err
	}
	if stored.Owner != nil && (e == nil || e.res.Owner == nil || ownerKeyOf(e.res.Owner) != ownerKeyOf(stored.Owner)) {
		if !b.exists(stored.Owner) {
			return nil, storage.ErrOwnerNotFound
		}
	}
	if ti == nil {
		ti = newTypeIndex()
		b.types[typ] = ti
	}
	var replaced *pbresource.Resource
	if e != nil {
		replaced = e.res
		if stored.Id.Uid == "" {
			stored.Id.Uid = e.res.Id.GetUid()
		}
	}

	e = b.store(ti, typ, key, e, stored, size)
	b.recordWrite(ctx, ti, e, replaced, stored)
	return stored, nil
}

// WriteStatusCAS stores stored with status, which it takes over, under key
// (storage.StatusWriter), if stored is the resource stored under its name;
// otherwise storage.ErrCASFailure. The new stored resource shares every
// part of stored but the status map, and is returned; it is shared and
// must not be modified.
func (b *Backend) WriteStatusCAS(_ context.Context, stored *pbresource.Resource, key string, status *pbresource.Status) (*pbresource.Resource, error) {
	if stored.GetId().GetType() == nil {
		return nil, errInvalidID
	}
	typ := storage.UnversionedTypeFrom(stored.Id.Type)
	k := resource.NameKeyOf(stored.Id)

	// Built outside the lock, like WriteCAS's copy; it is thrown away if
	// stored is no longer current.
	res := storage.WithStatus(stored, key, status)
	size := sizeOf(res)

	b.mu.Lock()
	defer b.mu.Unlock()
	ti := b.typeIndexOf(typ)
	var e *entry
	if ti != nil {
		e = ti.byKey.get(k)
	}
	if e == nil || e.res != stored {
		return nil, storage.ErrCASFailure
	}
	b.store(ti, typ, k, e, res, size)
	return res, nil
}

// typeIndexOf returns typ's index, or nil. The caller holds mu, shared or
// exclusively.
func (b *Backend) typeIndexOf(typ storage.UnversionedType) *typeIndex {
	if b.lastTI != nil && typ == b.lastType {
		return b.lastTI
	}
	return b.types[typ]
}

// current returns the resource stored under key (if update, else nil: a
// create replaces nothing, or fails), or nil, and the ID of the type's
// latest write (see typeIndex.like), or nil.
func (b *Backend) current(typ storage.UnversionedType, key resource.NameKey, update bool) (res *pbresource.Resource, like *pbresource.ID) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if ti := b.typeIndexOf(typ); ti != nil {
		if update {
			if e := ti.byKey.get(key); e != nil {
				res = e.res
			}
		}
		like = ti.like
	}
	return res, like
}

// exists reports whether a resource is stored under id, with id.Uid if that
// is not empty. The caller holds mu.
func (b *Backend) exists(id *pbresource.ID) bool {
	ti := b.types[storage.UnversionedTypeFrom(id.Type)]
	if ti == nil {
		return false
	}
	e := ti.byKey.get(resource.NameKeyOf(id))
	return e != nil && (id.Uid == "" || id.Uid == e.res.Id.GetUid())
}

// store commits stored, the new form of e (nil when created), at the next
// revision: it updates the indexes and publishes the change. It returns
// the entry. The caller holds mu exclusively and has checked the write.
func (b *Backend) store(ti *typeIndex, typ storage.UnversionedType, key resource.NameKey, e *entry, stored *pbresource.Resource, size int64) *entry {
	b.revision++
	stored.Version = strconv.FormatUint(b.revision, 10)
	ti.like = stored.Id
	b.lastType, b.lastTI = typ, ti

	var prev *pbresource.Resource
	if e == nil {
		e = &entry{key: key, res: stored, sig: selector.SignatureOf(stored.Metadata)}
		ti.insert(e)
		if stored.Owner != nil {
			b.addOwned(ownerKeyOf(stored.Owner), e)
		}
	} else {
		old := e.res
		prev = old
		e.res = stored
		e.sig = selector.SignatureOf(stored.Metadata)
		if old.Owner != nil || stored.Owner != nil {
			if old.Owner == nil || stored.Owner == nil || ownerKeyOf(old.Owner) != ownerKeyOf(stored.Owner) {
				if old.Owner != nil {
					b.removeOwned(ownerKeyOf(old.Owner), e)
				}
				if stored.Owner != nil {
					b.addOwned(ownerKeyOf(stored.Owner), e)
				}
			}
		}
	}

	ti.count(stored, prev, false)
	b.publish(ti, typ, stored, prev, size, false)
	return e
}

// checkWrite applies WriteCAS's version and Uid rules to a write of res
// over e, the stored entry (nil if none). The caller holds mu.
func checkWrite(e *entry, res *pbresource.Resource) error {
	switch {
	case e == nil:
		if res.Version != "" {
			return storage.ErrCASFailure
		}
	case res.Version == "":
		return storage.ErrCASFailure
	case res.Id.Uid != "" && res.Id.Uid != e.res.Id.GetUid():
		return storage.ErrWrongUid
	case res.Version != e.res.Version:
		return storage.ErrCASFailure
	}
	return nil
}

// DeleteCAS deletes the resource under id if version is empty or the stored
// version. Deleting a missing resource, or one whose Uid differs from a
// non-empty id.Uid, succeeds without doing anything. A deletion takes a
// revision of its own, so later writes get greater versions. A tombstone
// (storage.WithTombstone) is stored at the revision before the deletion's,
// under the same lock.
func (b *Backend) DeleteCAS(ctx context.Context, id *pbresource.ID, version string, opts ...storage.DeleteOption) error {
	if id.GetType() == nil {
		return errInvalidID
	}
	typ := storage.UnversionedTypeFrom(id.Type)
	key := resource.NameKeyOf(id)
	do := storage.NewDeleteOptions(opts...)
	newTombstone := do.Tombstone

	b.mu.Lock()
	defer b.mu.Unlock()

	var e *entry
	if ti := b.types[typ]; ti != nil {
		e = ti.byKey.get(key)
	}
	if e == nil || (id.Uid != "" && id.Uid != e.res.Id.GetUid()) {
		if do.MustExist {
			return storage.ErrCASFailure
		}
		return nil
	}
	ti := b.types[typ]
	if version != "" && version != e.res.Version {
		return storage.ErrCASFailure
	}
	if newTombstone != nil && len(b.owned[ownerKeyOf(e.res.Id)]) > 0 {
		tomb, err := newTombstone()
		if err != nil {
			return err
		}
		if tomb.GetId().GetType() == nil {
			return errInvalidID
		}
		b.storeTombstone(tomb)
	}

	b.revision++
	ti.remove(e)
	if e.res.Owner != nil {
		b.removeOwned(ownerKeyOf(e.res.Owner), e)
	}
	ti.count(e.res, e.res, true)
	b.publish(ti, typ, e.res, e.res, sizeOf(e.res), true)
	b.recordDelete(ctx, ti, e, e.res)
	return nil
}

// storeTombstone creates tomb (which it takes over) unless something is
// stored under its ID. The caller holds mu exclusively.
func (b *Backend) storeTombstone(tomb *pbresource.Resource) {
	typ := storage.UnversionedTypeFrom(tomb.Id.Type)
	key := resource.NameKeyOf(tomb.Id)
	ti := b.types[typ]
	if ti == nil {
		ti = newTypeIndex()
		b.types[typ] = ti
	} else if ti.byKey.get(key) != nil {
		return
	}
	b.store(ti, typ, key, nil, tomb, sizeOf(tomb))
}

// List returns the stored resources of resType in tenancy (fields may be
// storage.Wildcard) whose names start with namePrefix, ordered by partition,
// namespace and name. The resources are shared and must not be modified.
func (b *Backend) List(_ context.Context, _ storage.ReadConsistency, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string) ([]*pbresource.Resource, error) {
	f := newFilter(tenancy, namePrefix)

	b.mu.RLock()
	ti := b.types[resType]
	if ti == nil {
		b.mu.RUnlock()
		return nil, nil
	}
	if !ti.dirty() {
		out := ti.list(f, selector.Prefilter{})
		b.mu.RUnlock()
		return out, nil
	}
	b.mu.RUnlock()

	// New or removed keys must be merged into the sorted slice first, which
	// needs the exclusive lock.
	b.mu.Lock()
	defer b.mu.Unlock()
	ti = b.types[resType]
	if ti == nil {
		return nil, nil
	}
	ti.merge()
	return ti.list(f, selector.Prefilter{}), nil
}

// OwnerReferences returns the IDs of the resources whose Owner is id (type
// without GroupVersion, tenancy, name and Uid all equal). The IDs are shared
// and must not be modified. They are ordered by type, then tenancy and name.
func (b *Backend) OwnerReferences(_ context.Context, id *pbresource.ID) ([]*pbresource.ID, error) {
	if id.GetType() == nil {
		return nil, errInvalidID
	}
	b.mu.RLock()
	set := b.owned[ownerKeyOf(id)]
	out := make([]*pbresource.ID, 0, len(set))
	for e := range set {
		out = append(out, e.res.Id)
	}
	b.mu.RUnlock()

	slices.SortFunc(out, func(x, y *pbresource.ID) int {
		if c := cmp.Compare(x.Type.GetGroup(), y.Type.GetGroup()); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Type.GetKind(), y.Type.GetKind()); c != 0 {
			return c
		}
		return compareKeys(resource.NameKeyOf(x), resource.NameKeyOf(y))
	})
	return out, nil
}

func (b *Backend) addOwned(k ownerKey, e *entry) {
	set := b.owned[k]
	if set == nil {
		set = make(map[*entry]struct{}, 1)
		b.owned[k] = set
	}
	set[e] = struct{}{}
}

func (b *Backend) removeOwned(k ownerKey, e *entry) {
	set := b.owned[k]
	delete(set, e)
	if len(set) == 0 {
		delete(b.owned, k)
	}
}

// filter is the tenancy and name-prefix part of a List or WatchList query.
type filter struct {
	partition, namespace, prefix string
}

func newFilter(t *pbresource.Tenancy, prefix string) filter {
	return filter{partition: t.GetPartition(), namespace: t.GetNamespace(), prefix: prefix}
}

func (f *filter) matches(k resource.NameKey) bool {
	return (f.partition == storage.Wildcard || f.partition == k.Partition) &&
		(f.namespace == storage.Wildcard || f.namespace == k.Namespace) &&
		len(k.Name) >= len(f.prefix) && k.Name[:len(f.prefix)] == f.prefix
}

// publish appends the change at the current revision to the event log and
// wakes the watches of typ. The caller holds mu exclusively. One event is
// allocated and shared by all watches.
func (b *Backend) publish(ti *typeIndex, typ storage.UnversionedType, res, prev *pbresource.Resource, size int64, deleted bool) {
	f := ti.feed
	if f == nil {
		// The type's first change: its feed may exist already, made by a
		// WatchList of the type.
		if f = b.feeds[typ]; f == nil {
			f = b.newFeed(typ)
			b.feeds[typ] = f
		}
		ti.feed = f
	}
	e := newEntry(b.revision, f, res, prev, size, deleted)
	b.log.append(e)
	f.wake()
	if e.rev%reapEvery == 0 && b.reaping.CompareAndSwap(false, true) {
		go b.reap()
	}
}
