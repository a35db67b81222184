package inmem

import (
	"cmp"
	"context"
	"slices"
	"sort"
	"strconv"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
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
	v, err := b.pageVersion(req.Version)
	if err != nil {
		return storage.Page{}, err
	}
	// One type: keys leave the type out.
	var after *pkey
	if req.After != nil {
		after = &pkey{key: resource.NameKey{Partition: req.After.Partition, Namespace: req.After.Namespace, Name: req.After.Name}}
	}
	undo, err := b.undoSince(v, func(e *logEntry) (pkey, bool) {
		if e.feed.typ != resType {
			return pkey{}, false
		}
		k := pkey{key: e.key()}
		return k, f.matches(k.key) && (after == nil || comparePKeys(k, *after) > 0)
	})
	if err != nil {
		return storage.Page{}, err
	}

	if v == b.revision && after == nil && req.Limit == 0 {
		// The whole listing now: List's.
		var res []*pbresource.Resource
		if ti != nil {
			res = ti.list(f, req.Labels)
		}
		return storage.Page{Resources: res, Version: strconv.FormatUint(v, 10)}, nil
	}

	var cands []*entry
	if ti != nil {
		lo, hi, _ := ti.bounds(f)
		cands = ti.sorted[lo:hi]
		if after != nil {
			cands = cands[sort.Search(len(cands), func(i int) bool { return compareKeys(cands[i].key, after.key) > 0 }):]
		}
	}
	return mergePage(len(cands), func(i int) (pkey, *pbresource.Resource, bool) {
		e := cands[i]
		return pkey{key: e.key}, e.res, f.matches(e.key) && req.Labels.MayMatch(e.sig)
	}, undo, v, req.Limit), nil
}

// pkey is a resource's key in a page: its type (left empty in a listing of
// one type) and its key within the type.
type pkey struct {
	typ storage.UnversionedType
	key resource.NameKey
}

func pkeyOf(id *pbresource.ID) pkey {
	return pkey{typ: storage.UnversionedTypeFrom(id.GetType()), key: resource.NameKeyOf(id)}
}

func comparePKeys(a, b pkey) int {
	if c := cmp.Compare(a.typ.Group, b.typ.Group); c != 0 {
		return c
	}
	if c := cmp.Compare(a.typ.Kind, b.typ.Kind); c != 0 {
		return c
	}
	return compareKeys(a.key, b.key)
}

// pageVersion returns the revision a page with the given version is at:
// the current one for an empty version. The caller holds mu.
func (b *Backend) pageVersion(version string) (uint64, error) {
	if version == "" {
		return b.revision, nil
	}
	v, err := strconv.ParseUint(version, 10, 64)
	if err != nil {
		return 0, storage.ErrInvalidVersion
	}
	if v > b.revision {
		return 0, storage.ErrFutureVersion
	}
	return v, nil
}

// undoSince returns what differs at revision v from now among the changes
// pick selects: for each key a selected change after v touched, the state
// before the oldest such change (nil: absent at v). It is nil when v is
// the current revision, storage.ErrVersionGone when the log no longer has
// every change after v. The caller holds mu.
func (b *Backend) undoSince(v uint64, pick func(e *logEntry) (pkey, bool)) (map[pkey]*pbresource.Resource, error) {
	cur := b.revision
	if v == cur {
		return nil, nil
	}
	if b.log.tail.Load() > v+1 {
		return nil, storage.ErrVersionGone
	}
	undo := make(map[pkey]*pbresource.Resource)
	for r := cur; r > v; r-- {
		e := b.log.entry(r)
		if e == nil {
			return nil, storage.ErrVersionGone
		}
		if k, ok := pick(e); ok {
			undo[k] = e.prev
		}
	}
	return undo, nil
}

// mergePage returns the page at revision v holding, in key order, the n
// candidates (cand(i) is the i-th current resource after the page's start,
// in key order, and whether the query selects it) that no change after v
// touched, merged with the non-nil states of undo (undoSince's, of keys
// after the page's start), up to limit (0: no limit).
func mergePage(n int, cand func(i int) (pkey, *pbresource.Resource, bool), undo map[pkey]*pbresource.Resource, v uint64, limit int) storage.Page {
	type undone struct {
		key pkey
		res *pbresource.Resource
	}
	olds := make([]undone, 0, len(undo))
	for k, res := range undo {
		if res != nil {
			olds = append(olds, undone{k, res})
		}
	}
	slices.SortFunc(olds, func(x, y undone) int { return comparePKeys(x.key, y.key) })

	page := storage.Page{Version: strconv.FormatUint(v, 10)}
	if total := n + len(olds); limit == 0 || total < limit {
		page.Resources = make([]*pbresource.Resource, 0, total)
	} else {
		page.Resources = make([]*pbresource.Resource, 0, limit)
	}
	var lastKey pkey
	i, j := 0, 0
	for {
		var ck pkey
		var cres *pbresource.Resource
		for ; i < n; i++ {
			k, res, ok := cand(i)
			if _, changed := undo[k]; ok && !changed {
				ck, cres = k, res
				break
			}
		}
		var next *pbresource.Resource
		var nk pkey
		switch {
		case i < n && (j == len(olds) || comparePKeys(ck, olds[j].key) < 0):
			next, nk = cres, ck
			i++
		case j < len(olds):
			next, nk = olds[j].res, olds[j].key
			j++
		default:
			return page
		}
		if limit > 0 && len(page.Resources) == limit {
			// One more exists: the page is full.
			page.Last = storage.PageKey{Type: lastKey.typ, Partition: lastKey.key.Partition, Namespace: lastKey.key.Namespace, Name: lastKey.key.Name}
			page.More = true
			return page
		}
		page.Resources = append(page.Resources, next)
		lastKey = nk
	}
}

// ListOwnedPage returns one page of the resources owner owned at
// req.Version (storage.OwnerPagedLister), ordered by type, then tenancy and
// name.
//
// Like ListPage it rebuilds an older version with the log: the owner index
// now, with every change after the version that touched the owner's
// resources undone (a change whose previous or new state the owner owns:
// a create, update or delete of an owned resource, or a change of its
// owner). The owner index is a set, so each page sorts the owner's entries
// after req.After under the store's read lock: about n comparisons for a
// page of an owner of n resources (see smallestOwned), n log n for an
// unlimited one.
func (b *Backend) ListOwnedPage(_ context.Context, owner *pbresource.ID, req storage.PageRequest) (storage.Page, error) {
	if owner.GetType() == nil {
		return storage.Page{}, errInvalidID
	}
	byOwner := ownerKeyOf(owner)
	var after *pkey
	if req.After != nil {
		after = &pkey{typ: req.After.Type, key: resource.NameKey{Partition: req.After.Partition, Namespace: req.After.Namespace, Name: req.After.Name}}
	}
	follows := func(k pkey) bool { return after == nil || comparePKeys(k, *after) > 0 }
	owns := func(res *pbresource.Resource) bool {
		return res != nil && res.Owner != nil && ownerKeyOf(res.Owner) == byOwner
	}

	b.mu.RLock()
	locked := true
	defer func() {
		if locked {
			b.mu.RUnlock()
		}
	}()
	v, err := b.pageVersion(req.Version)
	if err != nil {
		return storage.Page{}, err
	}
	undo, err := b.undoSince(v, func(e *logEntry) (pkey, bool) {
		deleted := e.ev.GetDelete() != nil
		if !owns(e.prev) && (deleted || !owns(e.res)) {
			return pkey{}, false
		}
		k := pkey{typ: e.feed.typ, key: e.key()}
		return k, follows(k)
	})
	if err != nil {
		return storage.Page{}, err
	}
	// The state at v of a key is the owner's only if the owner owned it.
	for k, res := range undo {
		if !owns(res) {
			undo[k] = nil
		}
	}

	set := b.owned[byOwner]
	var cs []ownedCand
	if req.Limit > 0 {
		// The page needs at most limit+1 candidates that no change after
		// v touched: the smallest limit+1+len(undo) hold them.
		cs = smallestOwned(set, follows, req.Limit+1+len(undo))
	} else {
		cs = make([]ownedCand, 0, len(set))
		for e := range set {
			if k := pkeyOf(e.res.Id); follows(k) {
				cs = append(cs, ownedCand{k, e.res})
			}
		}
		if undo == nil {
			// Everything now, as OwnerReferences: sorted outside the lock.
			b.mu.RUnlock()
			locked = false
			slices.SortFunc(cs, compareOwnedCands)
			res := make([]*pbresource.Resource, len(cs))
			for i, c := range cs {
				res[i] = c.res
			}
			return storage.Page{Resources: res, Version: strconv.FormatUint(v, 10)}, nil
		}
		slices.SortFunc(cs, compareOwnedCands)
	}
	return mergePage(len(cs), func(i int) (pkey, *pbresource.Resource, bool) {
		return cs[i].key, cs[i].res, true
	}, undo, v, req.Limit), nil
}

// ownedCand is a resource of the owner index with its key.
type ownedCand struct {
	key pkey
	res *pbresource.Resource
}

func compareOwnedCands(x, y ownedCand) int { return comparePKeys(x.key, y.key) }

// smallestOwned returns the m smallest resources of set whose keys
// follow (per follows), in key order. It keeps a max-heap of m: a page of
// an owner of n resources costs about n comparisons (n log m at worst)
// and memory for m candidates, not a sort of n.
func smallestOwned(set map[*entry]struct{}, follows func(pkey) bool, m int) []ownedCand {
	h := make([]ownedCand, 0, min(m, len(set)))
	down := func(i int) {
		for {
			l, big := 2*i+1, i
			if l < m && compareOwnedCands(h[l], h[big]) > 0 {
				big = l
			}
			if r := l + 1; r < m && compareOwnedCands(h[r], h[big]) > 0 {
				big = r
			}
			if big == i {
				return
			}
			h[i], h[big] = h[big], h[i]
			i = big
		}
	}
	for e := range set {
		k := pkeyOf(e.res.Id)
		if !follows(k) {
			continue
		}
		c := ownedCand{k, e.res}
		switch {
		case len(h) < m:
			h = append(h, c)
			if len(h) == m {
				for i := m/2 - 1; i >= 0; i-- {
					down(i)
				}
			}
		case compareOwnedCands(c, h[0]) < 0:
			h[0] = c
			down(0)
		}
	}
	slices.SortFunc(h, compareOwnedCands)
	return h
}
