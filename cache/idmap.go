package cache

import (
	"hash/maphash"

	"github.com/loomrt/loom/resource"
)

// idMap finds a type's entries by tenancy, then by name. A type's resources
// live in few tenancies, so most operations hash the name alone rather than
// a key of three strings.
//
// Within a tenancy, entries are keyed by a 64-bit hash of their name, not by
// the name: a map that grows moves every key and rehashes it, and a string
// key means reading the string's bytes, scattered over the heap, on every
// move. That was about a quarter of a W6 insert; a hash moves without
// touching them. A hit is confirmed against the entry's own name, and a name
// whose hash another name already holds (practically never: 64 bits) goes
// to the tenancy's overflow map, keyed by the name itself.
type idMap struct {
	n         int
	seed      maphash.Seed
	byTenancy map[tenancyKey]*names

	// testHash, when set, replaces the hash (tests force collisions).
	testHash func(name string) uint64
}

type tenancyKey struct{ partition, namespace string }

// names holds one tenancy's entries.
type names struct {
	byHash   map[uint64]*entry
	overflow map[string]*entry // names whose hash another name holds in byHash
}

func newIDMap() idMap {
	return idMap{seed: maphash.MakeSeed(), byTenancy: make(map[tenancyKey]*names)}
}

func (m *idMap) hash(name string) uint64 {
	if m.testHash != nil {
		return m.testHash(name)
	}
	return maphash.String(m.seed, name)
}

// nameOf returns the name an entry is stored under.
func nameOf(e *entry) string { return e.res.GetId().GetName() }

func (m *idMap) len() int { return m.n }

func (m *idMap) get(k resource.NameKey) (*entry, bool) {
	ns := m.byTenancy[tenancyKey{k.Partition, k.Namespace}]
	if ns == nil {
		return nil, false
	}
	if e, ok := ns.byHash[m.hash(k.Name)]; ok && nameOf(e) == k.Name {
		return e, true
	}
	if len(ns.overflow) > 0 {
		e, ok := ns.overflow[k.Name]
		return e, ok
	}
	return nil, false
}

// swap stores e under k and returns the entry it replaced, if any.
func (m *idMap) swap(k resource.NameKey, e *entry) (prev *entry) {
	tk := tenancyKey{k.Partition, k.Namespace}
	ns := m.byTenancy[tk]
	if ns == nil {
		ns = &names{byHash: make(map[uint64]*entry)}
		m.byTenancy[tk] = ns
	}
	if len(ns.overflow) > 0 {
		if prev, ok := ns.overflow[k.Name]; ok {
			ns.overflow[k.Name] = e
			return prev
		}
	}
	h := m.hash(k.Name)
	prev, ok := ns.byHash[h]
	switch {
	case !ok:
		ns.byHash[h] = e
	case nameOf(prev) == k.Name:
		ns.byHash[h] = e
		return prev
	default:
		if ns.overflow == nil {
			ns.overflow = make(map[string]*entry)
		}
		ns.overflow[k.Name] = e
	}
	m.n++
	return nil
}

// remove deletes the entry under k and returns it, if any.
func (m *idMap) remove(k resource.NameKey) (*entry, bool) {
	tk := tenancyKey{k.Partition, k.Namespace}
	ns := m.byTenancy[tk]
	if ns == nil {
		return nil, false
	}
	h := m.hash(k.Name)
	e, ok := ns.byHash[h]
	switch {
	case ok && nameOf(e) == k.Name:
		delete(ns.byHash, h)
	case len(ns.overflow) > 0:
		if e, ok = ns.overflow[k.Name]; !ok {
			return nil, false
		}
		delete(ns.overflow, k.Name)
	default:
		return nil, false
	}
	m.n--
	if len(ns.byHash) == 0 && len(ns.overflow) == 0 {
		delete(m.byTenancy, tk)
	}
	return e, true
}

// presize prepares the map for resources, sizing each tenancy's map at
// once instead of growing it step by step. Call it on an empty map.
func (m *idMap) presize(counts map[tenancyKey]int) {
	for tk, n := range counts {
		if m.byTenancy[tk] == nil {
			m.byTenancy[tk] = &names{byHash: make(map[uint64]*entry, n)}
		}
	}
}

// each calls fn with every entry and its key until fn returns false. fn
// may remove the entry it is given.
func (m *idMap) each(fn func(k resource.NameKey, e *entry) bool) {
	for tk, ns := range m.byTenancy {
		for _, e := range ns.byHash {
			if !fn(resource.NameKey{Partition: tk.partition, Namespace: tk.namespace, Name: nameOf(e)}, e) {
				return
			}
		}
		for name, e := range ns.overflow {
			if !fn(resource.NameKey{Partition: tk.partition, Namespace: tk.namespace, Name: name}, e) {
				return
			}
		}
	}
}
