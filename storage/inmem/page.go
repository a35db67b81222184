package inmem

import (
	"context"
	"slices"
	"sort"
	"strconv"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// ListPage returns one page of a listing consistent at req.Version
// (storage.PagedLister).
//
// The store keeps only its current state, so a page at an older version V
// is rebuilt: the current index from req.After on, with every change of the
// type after V undone using the event log, whose entries keep what each
// change replaced. Nothing is kept per listing: a listing costs memory only
// while a page is built, and the log's retention (count and bytes) bounds
// how old a listing may get before its next page is storage.ErrVersionGone.
// The first page (empty Version) is at the current version and reads the
// index only; later pages scan the log entries after V, which is cheap
// unless many writes happened since the listing began. The scan holds the
// store's read lock, so writers wait for it; the log's count bound (131,072
// changes by default) bounds it.
//
// Keeping a snapshot per listing instead (the sorted slice of the first
// page) would make later pages cheaper, but memory would grow with the
// number of listings in progress, and nothing tells the store when a
// client gives up on one.
func (b *Backend) ListPage(_ context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string, req storage.PageRequest) (storage.Page, error) {
	f := newFilter(tenancy, namePrefix)

	b.mu.RLock()
	if ti := b.types[resType]; ti == nil || !ti.dirty() {
		defer b.mu.RUnlock()
		return b.listPage(ti, resType, f, req)
	}
	b.mu.RUnlock()

	// New or removed keys must be merged into the sorted slice first, which
	// needs the exclusive lock.
	b.mu.Lock()
	defer b.mu.Unlock()
	ti := b.types[resType]
	if ti != nil {
		ti.merge()
	}
	return b.listPage(ti, resType, f, req)
}

// listPage builds the page. ti (nil when the type has nothing stored) is
// merged; the caller holds mu, so no change is published meanwhile.
func (b *Backend) listPage(ti *typeIndex, resType storage.UnversionedType, f filter, req storage.PageRequest) (storage.Page, error) {
	cur := b.revision
	v := cur
	if req.Version != "" {
		var err error
		if v, err = strconv.ParseUint(req.Version, 10, 64); err != nil {
			return storage.Page{}, storage.ErrInvalidVersion
		}
		if v > cur {
			return storage.Page{}, storage.ErrFutureVersion
		}
	}
	var after *rkey
	if req.After != nil {
		after = &rkey{partition: req.After.Partition, namespace: req.After.Namespace, name: req.After.Name}
	}
	selected := func(k rkey) bool {
		return f.matches(k) && (after == nil || compareKeys(k, *after) > 0)
	}

	// What differs at v from now: the state before the oldest change after
	// v of each key (nil: absent at v).
	var undo map[rkey]*pbresource.Resource
	if v < cur {
		if b.log.tail.Load() > v+1 {
			return storage.Page{}, storage.ErrVersionGone
		}
		undo = make(map[rkey]*pbresource.Resource)
		for r := cur; r > v; r-- {
			e := b.log.entry(r)
			if e == nil {
				return storage.Page{}, storage.ErrVersionGone
			}
			if e.feed.typ == resType {
				if k := e.key(); selected(k) {
					undo[k] = e.prev
				}
			}
		}
	}
	undone := make([]*pbresource.Resource, 0, len(undo))
	for _, res := range undo {
		if res != nil {
			undone = append(undone, res)
		}
	}
	slices.SortFunc(undone, func(x, y *pbresource.Resource) int { return compareKeys(keyOf(x.Id), keyOf(y.Id)) })

	if v == cur && after == nil && req.Limit == 0 {
		// The whole listing now: List's.
		var res []*pbresource.Resource
		if ti != nil {
			res = ti.list(f)
		}
		return storage.Page{Resources: res, Version: strconv.FormatUint(v, 10)}, nil
	}

	var cands []*entry
	if ti != nil {
		lo, hi, _ := ti.bounds(f)
		cands = ti.sorted[lo:hi]
		if after != nil {
			cands = cands[sort.Search(len(cands), func(i int) bool { return compareKeys(cands[i].key, *after) > 0 }):]
		}
	}

	// Merge the current entries that no change after v touched with the
	// undone states, in key order.
	page := storage.Page{Version: strconv.FormatUint(v, 10)}
	limit := req.Limit
	if n := len(cands) + len(undone); limit == 0 || n < limit {
		page.Resources = make([]*pbresource.Resource, 0, n)
	} else {
		page.Resources = make([]*pbresource.Resource, 0, limit)
	}
	i, j := 0, 0
	for {
		for i < len(cands) {
			if _, changed := undo[cands[i].key]; changed || !f.matches(cands[i].key) {
				i++
				continue
			}
			break
		}
		var next *pbresource.Resource
		switch {
		case i < len(cands) && (j == len(undone) || compareKeys(cands[i].key, keyOf(undone[j].Id)) < 0):
			next = cands[i].res
			i++
		case j < len(undone):
			next = undone[j]
			j++
		default:
			return page, nil
		}
		if limit > 0 && len(page.Resources) == limit {
			// One more exists: the page is full.
			last := keyOf(page.Resources[limit-1].Id)
			page.Last = storage.PageKey{Partition: last.partition, Namespace: last.namespace, Name: last.name}
			page.More = true
			return page, nil
		}
		page.Resources = append(page.Resources, next)
	}
}
