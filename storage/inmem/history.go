package inmem

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// WithHistory keeps history (storage.Historian) within limits; a zero field
// takes storage.DefaultHistoryLimits'. History is kept by default.
func WithHistory(limits storage.HistoryLimits) Option {
	return func(b *Backend) { b.hist = newHistory(limits) }
}

// WithoutHistory keeps no history: the Historian methods find nothing.
func WithoutHistory() Option {
	return func(b *Backend) { b.hist = nil }
}

var _ storage.Historian = (*Backend)(nil)

// errBadVersion is returned for a version or page start that is not one of
// the store's versions.
var errBadVersion = errors.New("inmem: version must be a version the store returned")

// history is what the store keeps of the past, under its lock: per name, a
// ring of its last write revisions and the deletion revisions of its
// lifetimes; per type, the trash (the deletion revisions in the order they
// were made, for the trash bounds); and the trash by owner Uid.
//
// A revision shares the stored message (immutable), so a kept version costs
// its record (rec) plus whatever of the message no later version shares.
//
// Bounds: KeepVersions is enforced as a write is recorded (the ring drops
// its oldest, O(1)). The trash bounds are enforced in amortized O(1) steps:
// a deletion drops the type's oldest deletions beyond TrashPerType or past
// TrashRetention, and any recorded write drops its type's expired ones, in
// order from the oldest, so no write scans the trash; reads skip what has
// expired but was not dropped yet. The write revisions of a lifetime go
// with its deletion revision, so the history of deleted names is bounded
// by the trash bounds.
type history struct {
	limits storage.HistoryLimits
	now    func() time.Time
	// byOwner maps an owner Uid to the kept deletions of what it owned.
	byOwner map[string]map[trashRef]struct{}
}

// typeHistory is the history of one type, in its typeIndex.
type typeHistory struct {
	// deleted holds the histories of the names whose last lifetime was
	// deleted; a live name's history hangs off its entry.
	deleted map[resource.NameKey]*nameHistory
	// trash holds the type's kept deletions, oldest first, from head.
	trash []trashRef
	head  int
}

// nameHistory is the history of one name of a type.
type nameHistory struct {
	key resource.NameKey
	// writes holds the last write revisions, oldest first (a ring).
	writes ring
	// deletes holds the kept deletion revisions, oldest first.
	deletes []rec
	// first is the ring's first buffer, so that recording a create costs
	// one allocation.
	first [1]rec
}

// rec is one revision.
type rec struct {
	res     *pbresource.Resource
	by      string
	cascade *pbresource.ID
	ver     uint64
	nanos   int64
	deleted bool
	created bool
}

// trashRef locates a deletion revision: its name's history and version.
type trashRef struct {
	h   *nameHistory
	ver uint64
}

func newHistory(limits storage.HistoryLimits) *history {
	d := storage.DefaultHistoryLimits
	if limits.KeepVersions == 0 {
		limits.KeepVersions = d.KeepVersions
	}
	if limits.TrashRetention == 0 {
		limits.TrashRetention = d.TrashRetention
	}
	if limits.TrashPerType == 0 {
		limits.TrashPerType = d.TrashPerType
	}
	return &history{limits: limits, now: time.Now, byOwner: make(map[string]map[trashRef]struct{})}
}

func (h *history) newRec(ctx context.Context, res *pbresource.Resource, ver uint64, deleted bool) rec {
	c := storage.ChangeFrom(ctx)
	return rec{res: res, by: c.By, cascade: c.CascadeFrom, ver: ver, nanos: h.now().UnixNano(), deleted: deleted}
}

// expired reports whether a deletion made at nanos is past the retention.
func (h *history) expired(nanos, now int64) bool {
	r := h.limits.TrashRetention
	return r > 0 && now-nanos > int64(r)
}

// historyOf returns the history of e's name, made (or taken back from
// th.deleted, when the name is created again) if need be.
func (th *typeHistory) historyOf(e *entry) *nameHistory {
	if e.hist != nil {
		return e.hist
	}
	nh := th.deleted[e.key]
	if nh != nil {
		delete(th.deleted, e.key)
	} else {
		nh = &nameHistory{key: e.key}
		nh.writes.buf = nh.first[:]
	}
	e.hist = nh
	return nh
}

// recordWrite records res, just stored over prev (nil on a create), if its
// Generation changed. The caller holds mu exclusively.
func (b *Backend) recordWrite(ctx context.Context, ti *typeIndex, e *entry, prev, res *pbresource.Resource) {
	h := b.hist
	if h == nil || (prev != nil && prev.Generation == res.Generation) || isTombstone(res) {
		return
	}
	th := ti.historyOf()
	r := h.newRec(ctx, res, b.revision, false)
	r.created = prev == nil
	th.historyOf(e).writes.push(r, h.limits.KeepVersions)
	h.pruneTrash(th, r.nanos)
}

// recordDelete records the deletion of res at the current revision. The
// caller holds mu exclusively.
func (b *Backend) recordDelete(ctx context.Context, ti *typeIndex, e *entry, res *pbresource.Resource) {
	h := b.hist
	if h == nil || isTombstone(res) {
		return
	}
	th := ti.historyOf()
	r := h.newRec(ctx, res, b.revision, true)
	nh := th.historyOf(e)
	e.hist = nil
	th.deleted[e.key] = nh
	nh.deletes = append(nh.deletes, r)
	ref := trashRef{h: nh, ver: r.ver}
	th.trash = append(th.trash, ref)
	if o := res.Owner; o != nil {
		set := h.byOwner[o.Uid]
		if set == nil {
			set = make(map[trashRef]struct{}, 1)
			h.byOwner[o.Uid] = set
		}
		set[ref] = struct{}{}
	}
	h.pruneTrash(th, r.nanos)
}

func isTombstone(res *pbresource.Resource) bool {
	return resource.EqualType(res.Id.Type, resource.TypeV1Tombstone)
}

// historyOf returns ti's history, made if need be.
func (ti *typeIndex) historyOf() *typeHistory {
	if ti.hist == nil {
		ti.hist = &typeHistory{deleted: make(map[resource.NameKey]*nameHistory)}
	}
	return ti.hist
}

// pruneTrash drops th's oldest deletions beyond the bounds, each in O(1)
// (amortized), with the write revisions of their lifetimes.
func (h *history) pruneTrash(th *typeHistory, now int64) {
	for th.head < len(th.trash) {
		ref := th.trash[th.head]
		d := ref.h.deletes[0] // the oldest deletion of the type is its name's oldest
		over := h.limits.TrashPerType > 0 && len(th.trash)-th.head > h.limits.TrashPerType
		if !over && !h.expired(d.nanos, now) {
			break
		}
		th.trash[th.head] = trashRef{}
		th.head++
		h.dropDeletion(th, ref.h, d)
	}
	// Compact once the dropped part is the larger half.
	if th.head > 32 && th.head*2 > len(th.trash) {
		th.trash = append(th.trash[:0:0], th.trash[th.head:]...)
		th.head = 0
	}
}

// dropDeletion forgets d, nh's oldest deletion, and the write revisions of
// its lifetime.
func (h *history) dropDeletion(th *typeHistory, nh *nameHistory, d rec) {
	nh.deletes[0] = rec{}
	nh.deletes = nh.deletes[1:]
	uid := d.res.Id.Uid
	for nh.writes.n > 0 && nh.writes.at(0).res.Id.Uid == uid {
		nh.writes.popFront()
	}
	if o := d.res.Owner; o != nil {
		set := h.byOwner[o.Uid]
		delete(set, trashRef{h: nh, ver: d.ver})
		if len(set) == 0 {
			delete(h.byOwner, o.Uid)
		}
	}
	if nh.writes.n == 0 && len(nh.deletes) == 0 && th.deleted[nh.key] == nh {
		delete(th.deleted, nh.key)
	}
}

// ring is a queue of revisions that holds at most a bound, dropping its
// oldest beyond it.
type ring struct {
	buf     []rec
	head, n int
}

// push appends r, dropping the oldest if the ring holds keep (keep < 0: no
// bound).
func (q *ring) push(r rec, keep int) {
	if q.n == len(q.buf) {
		if keep >= 0 && q.n >= keep {
			if keep == 0 {
				return
			}
			q.buf[q.head] = r
			q.head = (q.head + 1) % len(q.buf)
			return
		}
		q.grow(keep)
	}
	q.buf[(q.head+q.n)%len(q.buf)] = r
	q.n++
}

func (q *ring) grow(keep int) {
	size := max(2*len(q.buf), 2)
	if keep > 0 {
		size = min(size, keep)
	}
	buf := make([]rec, size)
	for i := range q.n {
		buf[i] = q.at(i)
	}
	q.buf, q.head = buf, 0
}

// at returns the i-th oldest revision.
func (q *ring) at(i int) rec { return q.buf[(q.head+i)%len(q.buf)] }

func (q *ring) popFront() {
	q.buf[q.head] = rec{}
	q.head = (q.head + 1) % len(q.buf)
	q.n--
}

func (r rec) revision() storage.Revision {
	v := r.res.Version
	if r.deleted {
		v = strconv.FormatUint(r.ver, 10)
	}
	return storage.Revision{
		Resource: r.res, Version: v, Time: time.Unix(0, r.nanos),
		By: r.by, CascadeFrom: r.cascade, Deleted: r.deleted, Created: r.created,
	}
}

// nameHistoryOf returns the history of id's name, or nil. The caller holds
// mu.
func (b *Backend) nameHistoryOf(id *pbresource.ID) *nameHistory {
	if b.hist == nil || id.GetType() == nil {
		return nil
	}
	ti := b.types[storage.UnversionedTypeFrom(id.Type)]
	if ti == nil || ti.hist == nil {
		return nil
	}
	key := resource.NameKeyOf(id)
	if e := ti.byKey.get(key); e != nil && e.hist != nil {
		return e.hist
	}
	return ti.hist.deleted[key]
}

// recs returns nh's revisions not expired at now, oldest first.
func (h *history) recs(nh *nameHistory, now int64) []rec {
	out := make([]rec, 0, nh.writes.n+len(nh.deletes))
	for i := range nh.writes.n {
		out = append(out, nh.writes.at(i))
	}
	for _, d := range nh.deletes {
		if !h.expired(d.nanos, now) {
			out = append(out, d)
		}
	}
	slices.SortFunc(out, func(x, y rec) int { return compareUint(x.ver, y.ver) })
	return out
}

func compareUint(x, y uint64) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// ReadRevision returns the revision of id's name at version
// (storage.Historian).
func (b *Backend) ReadRevision(_ context.Context, id *pbresource.ID, version string) (storage.Revision, error) {
	ver, err := strconv.ParseUint(version, 10, 64)
	if err != nil {
		return storage.Revision{}, errBadVersion
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	nh := b.nameHistoryOf(id)
	if nh == nil {
		return storage.Revision{}, storage.ErrNotFound
	}
	for _, r := range b.hist.recs(nh, b.hist.now().UnixNano()) {
		if r.ver == ver && (id.Uid == "" || id.Uid == r.res.Id.Uid) {
			return r.revision(), nil
		}
	}
	return storage.Revision{}, storage.ErrNotFound
}

// ListRevisions returns the kept revisions of id's name, newest first
// (storage.Historian).
func (b *Backend) ListRevisions(_ context.Context, id *pbresource.ID, req storage.RevisionPageRequest) (storage.RevisionPage, error) {
	before, err := parseBefore(req.Before)
	if err != nil {
		return storage.RevisionPage{}, err
	}
	b.mu.RLock()
	var recs []rec
	if nh := b.nameHistoryOf(id); nh != nil {
		recs = b.hist.recs(nh, b.hist.now().UnixNano())
	}
	b.mu.RUnlock()
	slices.Reverse(recs)
	return page(recs, before, req.Limit), nil
}

// parseBefore parses a page start: 0 (none) if empty.
func parseBefore(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errBadVersion
	}
	return v, nil
}

// page returns the page of recs (newest first) starting below before
// (0: at the start).
func page(recs []rec, before uint64, limit int) storage.RevisionPage {
	var p storage.RevisionPage
	var last uint64
	for _, r := range recs {
		if before != 0 && r.ver >= before {
			continue
		}
		if limit > 0 && len(p.Revisions) == limit {
			p.Next = strconv.FormatUint(last, 10)
			break
		}
		p.Revisions = append(p.Revisions, r.revision())
		last = r.ver
	}
	return p
}

// deletion returns the deletion revision ref locates.
func (ref trashRef) deletion() (rec, bool) {
	i, ok := slices.BinarySearchFunc(ref.h.deletes, ref.ver, func(r rec, v uint64) int { return compareUint(r.ver, v) })
	if !ok {
		return rec{}, false
	}
	return ref.h.deletes[i], true
}

// ListTrash returns the kept deletions of resType in tenancy whose names
// start with namePrefix, newest first (storage.Historian).
func (b *Backend) ListTrash(_ context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string, req storage.RevisionPageRequest) (storage.RevisionPage, error) {
	before, err := parseBefore(req.Before)
	if err != nil {
		return storage.RevisionPage{}, err
	}
	f := newFilter(tenancy, namePrefix)
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.hist == nil {
		return storage.RevisionPage{}, nil
	}
	ti := b.types[resType]
	if ti == nil || ti.hist == nil {
		return storage.RevisionPage{}, nil
	}
	now := b.hist.now().UnixNano()
	th := ti.hist
	var recs []rec
	for i := len(th.trash) - 1; i >= th.head; i-- {
		ref := th.trash[i]
		if (before != 0 && ref.ver >= before) || !f.matches(ref.h.key) {
			continue
		}
		d, ok := ref.deletion()
		if !ok || b.hist.expired(d.nanos, now) {
			continue
		}
		recs = append(recs, d)
		if req.Limit > 0 && len(recs) > req.Limit {
			break
		}
	}
	return page(recs, 0, req.Limit), nil
}

// ListTrashOwnedBy returns the kept deletions of what owner owned, newest
// first (storage.Historian).
func (b *Backend) ListTrashOwnedBy(_ context.Context, owner *pbresource.ID, req storage.RevisionPageRequest) (storage.RevisionPage, error) {
	if owner.GetUid() == "" {
		return storage.RevisionPage{}, errors.New("inmem: the owner's Uid is required")
	}
	before, err := parseBefore(req.Before)
	if err != nil {
		return storage.RevisionPage{}, err
	}
	b.mu.RLock()
	var recs []rec
	if b.hist != nil {
		now := b.hist.now().UnixNano()
		for ref := range b.hist.byOwner[owner.Uid] {
			d, ok := ref.deletion()
			if ok && !b.hist.expired(d.nanos, now) {
				recs = append(recs, d)
			}
		}
	}
	b.mu.RUnlock()
	slices.SortFunc(recs, func(x, y rec) int { return compareUint(y.ver, x.ver) })
	return page(recs, before, req.Limit), nil
}
