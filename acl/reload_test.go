package acl_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/resource"
)

// TestOnReload: the function set by OnReload hears of every reload that
// puts new rules in force, and of no other.
func TestOnReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl.yaml")
	require.NoError(t, os.WriteFile(path, []byte(example), 0o600))
	src, err := acl.NewSource(path, nil)
	require.NoError(t, err)
	reloads := 0
	src.OnReload(func() { reloads++ })

	_, err = src.Reload()
	require.NoError(t, err)
	assert.Zero(t, reloads, "after a reload of an unchanged file")
	require.NoError(t, os.WriteFile(path, []byte("tokens: [\n"), 0o600))
	_, err = src.Reload()
	require.Error(t, err)
	assert.Zero(t, reloads, "after a reload that failed")
	require.NoError(t, os.WriteFile(path, []byte("tokens:\n  - {name: new, secret: new-secret}\n"), 0o600))
	_, err = src.Reload()
	require.NoError(t, err)
	assert.Equal(t, 1, reloads, "after a reload that changed the rules")
}

// TestAuthorizerEqual: Authorizers are equal when their rules are, whatever
// their tokens' names and secrets.
func TestAuthorizerEqual(t *testing.T) {
	p, err := acl.Parse("a.yaml", []byte(`tokens:
  - {name: a, secret: a, rules: [{type: "foo.*.Bar", partition: "*", namespace: "*", access: read}]}
  - {name: b, secret: b, rules: [{type: "foo.*.Bar", partition: "*", namespace: "*", access: read}]}
  - {name: c, secret: c, rules: [{type: "foo.*.Bar", partition: "*", namespace: "ns", access: read}]}
  - {name: d, secret: d, rules: [{type: "foo.*.Bar", partition: "*", namespace: "*", access: list}]}
  - {name: e, secret: e, rules: [{type: "foo.*.Bar", partition: "*", namespace: "*", access: read}, {capability: fence}]}
`))
	require.NoError(t, err)
	a, b, c, d, e := token(t, p, "a"), token(t, p, "b"), token(t, p, "c"), token(t, p, "d"), token(t, p, "e")
	assert.True(t, a.Equal(a))
	assert.True(t, a.Equal(b), "same rules, another name")
	assert.False(t, a.Equal(c), "another namespace")
	assert.False(t, a.Equal(d), "another access")
	assert.False(t, a.Equal(e), "another capability")
	assert.False(t, a.Equal(resource.AllowAll))
}
