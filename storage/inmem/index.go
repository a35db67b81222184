package inmem

import (
	"slices"
	"sort"
	"strings"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
	"github.com/loomrt/loom/storage"
)

// typeIndex holds the resources of one type (Group and Kind).
//
// byKey is the source of truth. sorted and pending together list every
// entry of byKey, plus entries removed since the last merge: sorted is in key
// order, pending holds entries created since, in no order. merge folds
// pending into sorted and drops removed entries; List merges before it reads
// sorted, so creates stay O(1) and List pays for the sort of what is new.
type typeIndex struct {
	byKey   keyMap
	sorted  []*entry
	pending []*entry
	// removed counts entries marked removed that are still in sorted or
	// pending.
	removed int
	// like is the ID of the latest resource stored: a new resource's copy
	// shares its Type and Tenancy when they are equal
	// (resource.CloneSharingID), so resources of one type and tenancy
	// written in a row keep one Type and one Tenancy between them.
	like *pbresource.ID
	// feed is the type's feed, once it had a change (see publish).
	feed *feed
	// hist is the type's history, once it has one (history.go).
	hist *typeHistory
	// counts are the type's counts by tenancy (counts.go); nil until the
	// type's first resource.
	counts map[tenancyUnits]*tenancyCount
}

// compactThreshold is the least number of removed entries that makes a
// write merge the index, so deletions cannot grow sorted and pending without
// bound when nobody lists.
const compactThreshold = 1024

func newTypeIndex() *typeIndex {
	return &typeIndex{byKey: newKeyMap()}
}

// insert adds a new entry. The caller holds the store lock exclusively.
func (ti *typeIndex) insert(e *entry) {
	ti.byKey.set(e.key, e)
	ti.pending = append(ti.pending, e)
}

// remove deletes an entry. The caller holds the store lock exclusively.
func (ti *typeIndex) remove(e *entry) {
	ti.byKey.delete(e.key)
	e.removed = true
	ti.removed++
	if ti.removed >= max(compactThreshold, ti.byKey.len()) {
		ti.merge()
	}
}

// dirty reports whether sorted is out of date.
func (ti *typeIndex) dirty() bool {
	return len(ti.pending) > 0 || ti.removed > 0
}

func compareEntries(a, b *entry) int { return compareKeys(a.key, b.key) }

// merge brings sorted up to date. The caller holds the store lock
// exclusively.
func (ti *typeIndex) merge() {
	if !ti.dirty() {
		return
	}
	slices.SortFunc(ti.pending, compareEntries)
	out := make([]*entry, 0, ti.byKey.len())
	i, j := 0, 0
	for i < len(ti.sorted) || j < len(ti.pending) {
		var e *entry
		if j == len(ti.pending) || (i < len(ti.sorted) && compareEntries(ti.sorted[i], ti.pending[j]) <= 0) {
			e = ti.sorted[i]
			i++
		} else {
			e = ti.pending[j]
			j++
		}
		if !e.removed {
			out = append(out, e)
		}
	}
	clear(ti.pending)
	ti.pending = ti.pending[:0]
	ti.sorted = out
	ti.removed = 0
}

// list returns the stored resources that match f, in key order, leaving out
// those labels rules out. sorted must be up to date; the caller holds the
// store lock.
func (ti *typeIndex) list(f filter, labels selector.Prefilter) []*pbresource.Resource {
	lo, hi, exact := ti.bounds(f)
	s := ti.sorted
	if lo == hi {
		return nil
	}
	if labels.Selective() {
		var out []*pbresource.Resource
		for _, e := range s[lo:hi] {
			if labels.MayMatch(e.sig) && (exact || f.matches(e.key)) {
				out = append(out, e.res)
			}
		}
		return out
	}
	if exact {
		out := make([]*pbresource.Resource, hi-lo)
		for i, e := range s[lo:hi] {
			out[i] = e.res
		}
		return out
	}
	var out []*pbresource.Resource
	for _, e := range s[lo:hi] {
		if f.matches(e.key) {
			out = append(out, e.res)
		}
	}
	return out
}

// bounds returns the range [lo, hi) of sorted that holds every entry
// matching f, and whether every entry in it matches. sorted must be up to
// date; the caller holds the store lock.
func (ti *typeIndex) bounds(f filter) (lo, hi int, exact bool) {
	s := ti.sorted
	lo, hi = 0, len(s)
	// exact: every entry in [lo, hi) matches f.
	switch {
	case f.partition == storage.Wildcard:
		exact = f.namespace == storage.Wildcard && f.prefix == ""
	case f.namespace == storage.Wildcard:
		lo = sort.Search(len(s), func(i int) bool { return s[i].key.Partition >= f.partition })
		hi = lo + sort.Search(len(s)-lo, func(i int) bool { return s[lo+i].key.Partition > f.partition })
		exact = f.prefix == ""
	default:
		start := resource.NameKey{Partition: f.partition, Namespace: f.namespace, Name: f.prefix}
		lo = sort.Search(len(s), func(i int) bool { return compareKeys(s[i].key, start) >= 0 })
		// Within one partition and namespace, the names with a prefix are
		// contiguous from start.
		hi = lo + sort.Search(len(s)-lo, func(i int) bool {
			k := s[lo+i].key
			return k.Partition != f.partition || k.Namespace != f.namespace || !strings.HasPrefix(k.Name, f.prefix)
		})
		exact = true
	}
	return lo, hi, exact
}
