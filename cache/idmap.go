package cache

// idMap finds a type's entries by tenancy, then by name. A type's resources
// live in few tenancies, so most operations hash the name alone, on a map
// keyed by one string, rather than a key of three strings: that halves the
// cost of the map on insert (W6).
type idMap struct {
	n         int
	byTenancy map[tenancyKey]map[string]*entry
}

type tenancyKey struct{ partition, namespace string }

func newIDMap() idMap {
	return idMap{byTenancy: make(map[tenancyKey]map[string]*entry)}
}

func (m *idMap) len() int { return m.n }

func (m *idMap) get(k idKey) (*entry, bool) {
	names := m.byTenancy[tenancyKey{k.partition, k.namespace}]
	e, ok := names[k.name]
	return e, ok
}

// swap stores e under k and returns the entry it replaced, if any.
func (m *idMap) swap(k idKey, e *entry) (prev *entry) {
	tk := tenancyKey{k.partition, k.namespace}
	names := m.byTenancy[tk]
	if names == nil {
		names = make(map[string]*entry)
		m.byTenancy[tk] = names
	}
	prev, ok := names[k.name]
	names[k.name] = e
	if !ok {
		m.n++
	}
	return prev
}

// remove deletes the entry under k and returns it, if any.
func (m *idMap) remove(k idKey) (*entry, bool) {
	tk := tenancyKey{k.partition, k.namespace}
	names := m.byTenancy[tk]
	e, ok := names[k.name]
	if !ok {
		return nil, false
	}
	delete(names, k.name)
	m.n--
	if len(names) == 0 {
		delete(m.byTenancy, tk)
	}
	return e, true
}

// presize prepares the map for resources, sizing each tenancy's map at
// once instead of growing it step by step. Call it on an empty map.
func (m *idMap) presize(counts map[tenancyKey]int) {
	for tk, n := range counts {
		if m.byTenancy[tk] == nil {
			m.byTenancy[tk] = make(map[string]*entry, n)
		}
	}
}

// each calls fn with every entry and its key until fn returns false. fn
// may remove the entry it is given.
func (m *idMap) each(fn func(k idKey, e *entry) bool) {
	for tk, names := range m.byTenancy {
		for name, e := range names {
			if !fn(idKey{tk.partition, tk.namespace, name}, e) {
				return
			}
		}
	}
}
