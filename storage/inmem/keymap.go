package inmem

import "github.com/loomrt/loom/resource"

// keyMap finds a type's entries by key: by tenancy, then by name. A type's
// resources live in few tenancies, so the big maps are those of names,
// whose slots hold a string and a pointer (24 bytes) rather than a key of
// three strings and a pointer (56): growing them moves less than half the
// bytes, and they keep less than half the room.
//
// The tenancy last written to is kept aside (set and delete run under the
// store's exclusive lock, get under its shared lock), so that a lookup in
// it, the common case, costs one map lookup rather than two.
type keyMap struct {
	n         int
	byTenancy map[tenancyKey]map[string]*entry
	last      tenancyKey
	lastNames map[string]*entry // byTenancy[last], or nil
}

type tenancyKey struct{ partition, namespace string }

func newKeyMap() keyMap {
	return keyMap{byTenancy: make(map[tenancyKey]map[string]*entry)}
}

func (m *keyMap) len() int { return m.n }

// get returns the entry under k, or nil.
func (m *keyMap) get(k resource.NameKey) *entry {
	if m.lastNames != nil && k.Partition == m.last.partition && k.Namespace == m.last.namespace {
		return m.lastNames[k.Name]
	}
	return m.byTenancy[tenancyKey{k.Partition, k.Namespace}][k.Name]
}

// set stores e under k.
func (m *keyMap) set(k resource.NameKey, e *entry) {
	tk := tenancyKey{k.Partition, k.Namespace}
	names := m.byTenancy[tk]
	if names == nil {
		names = make(map[string]*entry)
		m.byTenancy[tk] = names
	}
	if _, ok := names[k.Name]; !ok {
		m.n++
	}
	names[k.Name] = e
	m.last, m.lastNames = tk, names
}

// delete removes the entry under k, and its tenancy's map once empty.
func (m *keyMap) delete(k resource.NameKey) {
	tk := tenancyKey{k.Partition, k.Namespace}
	names := m.byTenancy[tk]
	if _, ok := names[k.Name]; !ok {
		return
	}
	m.n--
	if len(names) == 1 {
		delete(m.byTenancy, tk)
		if tk == m.last {
			m.last, m.lastNames = tenancyKey{}, nil
		}
		return
	}
	delete(names, k.Name)
}

// all calls yield for every entry, in no order.
func (m *keyMap) all(yield func(*entry) bool) {
	for _, names := range m.byTenancy {
		for _, e := range names {
			if !yield(e) {
				return
			}
		}
	}
}
