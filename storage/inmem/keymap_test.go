package inmem

import (
	"testing"

	"github.com/loomrt/loom/resource"
	"github.com/stretchr/testify/require"
)

func TestKeyMap(t *testing.T) {
	m := newKeyMap()
	keys := []resource.NameKey{nameKey("p", "a", "x"), nameKey("p", "a", "y"), nameKey("p", "b", "x"), nameKey("q", "a", "x")}
	entries := map[resource.NameKey]*entry{}
	for _, k := range keys {
		e := &entry{key: k}
		entries[k] = e
		m.set(k, e)
	}
	m.set(keys[0], entries[keys[0]]) // again: no new key
	require.Equal(t, len(keys), m.len())
	for _, k := range keys {
		require.Same(t, entries[k], m.get(k))
	}
	require.Nil(t, m.get(nameKey("p", "a", "z")))
	require.Nil(t, m.get(nameKey("p", "c", "x")))

	replaced := &entry{key: keys[1]}
	m.set(keys[1], replaced)
	require.Same(t, replaced, m.get(keys[1]))
	require.Equal(t, len(keys), m.len())

	m.delete(keys[2])
	m.delete(keys[2]) // gone already: nothing
	m.delete(nameKey("z", "z", "z"))
	require.Nil(t, m.get(keys[2]))
	require.Equal(t, len(keys)-1, m.len())
	require.NotContains(t, m.byTenancy, tenancyKey{"p", "b"}, "an emptied tenancy is dropped")

	var seen []resource.NameKey
	for e := range m.all {
		seen = append(seen, e.key)
	}
	require.ElementsMatch(t, []resource.NameKey{keys[0], keys[1], keys[3]}, seen)
	for e := range m.all {
		_ = e
		break // all stops when asked
	}
}

// TestKeyMapLastTenancy checks the tenancy kept aside through writes and
// deletes in several tenancies.
func TestKeyMapLastTenancy(t *testing.T) {
	m := newKeyMap()
	a, b := nameKey("p", "a", "x"), nameKey("p", "b", "x")
	ea, eb := &entry{key: a}, &entry{key: b}
	m.set(a, ea)
	m.set(b, eb)
	require.Same(t, ea, m.get(a))
	require.Same(t, eb, m.get(b))
	m.delete(b) // the last tenancy emptied
	require.Nil(t, m.get(b))
	require.Same(t, ea, m.get(a))
	m.set(b, eb)
	m.delete(a)
	require.Nil(t, m.get(a))
	require.Same(t, eb, m.get(b))
	m.set(a, ea)
	require.Same(t, ea, m.get(a))
}

func nameKey(partition, namespace, name string) resource.NameKey {
	return resource.NameKey{Partition: partition, Namespace: namespace, Name: name}
}
