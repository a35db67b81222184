package acl_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

const example = `# the example of the package doc
tokens:
  - name: bar-controller
    secret: "7d1c0f3e-example"
    rules:
      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: write}
      - {type: "foo.v1.Zip", partition: "default", namespace: "*", access: read}
  - name: reader
    secret: "reader-secret"
    rules:
      - {type: "*.*.*", partition: "default", namespace: "team-a", access: read}
      - {type: "foo.v1.Bar", partition: "default", namespace: "team-a", access: list}
  - name: cluster-admin
    secret: "admin-secret"
    rules:
      - {type: "foo.v1.Qux", partition: "*", namespace: "*", access: write}
`

func id(typ, partition, namespace, name string) *pbresource.ID {
	p := strings.Split(typ, ".")
	return &pbresource.ID{
		Type:    &pbresource.Type{Group: p[0], GroupVersion: p[1], Kind: p[2]},
		Tenancy: &pbresource.Tenancy{Partition: partition, Namespace: namespace},
		Name:    name,
	}
}

func token(t *testing.T, p *acl.Policy, secret string) *acl.Authorizer {
	t.Helper()
	a, ok := p.Token(secret)
	require.True(t, ok, "token not found")
	return a
}

func TestAllowed(t *testing.T) {
	p, err := acl.Parse("acl.yaml", []byte(example))
	require.NoError(t, err)
	require.Equal(t, 3, p.Len())
	ctrl, reader, admin := token(t, p, "7d1c0f3e-example"), token(t, p, "reader-secret"), token(t, p, "admin-secret")
	assert.Equal(t, "bar-controller", ctrl.Name())
	_, ok := p.Token("7d1c0f3e-exampl")
	assert.False(t, ok)
	_, ok = p.Token("")
	assert.False(t, ok)

	R, L, W := resource.AccessRead, resource.AccessList, resource.AccessWrite
	cases := []struct {
		name  string
		a     *acl.Authorizer
		acc   resource.Access
		id    *pbresource.ID
		allow bool
	}{
		{"write implies write", ctrl, W, id("foo.v2.Bar", "default", "ns1", "b"), true},
		{"write implies read", ctrl, R, id("foo.v1.Bar", "p2", "ns1", "b"), true},
		{"write implies list", ctrl, L, id("foo.v1.Bar", "*", "*", ""), true},
		{"read does not write", ctrl, W, id("foo.v1.Zip", "default", "", "z"), false},
		{"read reads; the rule's namespace \"*\" covers a type without one", ctrl, R, id("foo.v1.Zip", "default", "", "z"), true},
		{"read does not list", ctrl, L, id("foo.v1.Zip", "default", "*", ""), false},
		{"other partition", ctrl, R, id("foo.v1.Zip", "other", "", "z"), false},
		{"other group", ctrl, R, id("bar.v1.Bar", "default", "ns1", "b"), false},
		{"reader reads its namespace", reader, R, id("any.v9.Thing", "default", "team-a", "x"), true},
		{"reader not another namespace", reader, R, id("any.v9.Thing", "default", "team-b", "x"), false},
		{"reader lists across namespaces, filtered later", reader, L, id("foo.v1.Bar", "*", "*", ""), true},
		{"reader cannot list a namespace it has no rule for", reader, L, id("foo.v1.Bar", "default", "team-b", ""), false},
		{"reader cannot list another type", reader, L, id("foo.v1.Zip", "*", "*", ""), false},
		{"reader never writes", reader, W, id("foo.v1.Bar", "default", "team-a", "b"), false},
		{"cluster-scoped type by wildcards", admin, W, id("foo.v1.Qux", "", "", "q"), true},
		{"unit the type lacks needs a wildcard", reader, R, id("foo.v1.Qux", "", "", "q"), false},
	}
	for _, c := range cases {
		assert.Equal(t, c.allow, c.a.Allowed(c.acc, c.id), c.name)
	}
}

func TestParseErrorsNameFileAndLine(t *testing.T) {
	cases := map[string]struct {
		file, want string
	}{
		"bad access": {
			"tokens:\n  - name: a\n    secret: s\n    rules:\n      - {type: a.b.c, partition: '*', namespace: '*', access: admin}\n",
			`acl.yaml:5: token "a", rule 1: access "admin" is not read, list or write`,
		},
		"bad type": {
			"tokens:\n  - name: a\n    secret: s\n    rules:\n      - {type: a.b, partition: '*', namespace: '*', access: read}\n",
			`acl.yaml:5: token "a", rule 1: type "a.b" is not a group.version.kind pattern`,
		},
		"empty type part": {
			"tokens:\n  - name: a\n    secret: s\n    rules:\n      - {type: a..c, partition: '*', namespace: '*', access: read}\n",
			`has an empty part`,
		},
		"missing namespace": {
			"tokens:\n  - name: a\n    secret: s\n    rules:\n      - {type: a.b.c, partition: '*', access: read}\n",
			`acl.yaml:5: token "a", rule 1: namespace is required`,
		},
		"bad partition": {
			"tokens:\n  - name: a\n    secret: s\n    rules:\n      - {type: a.b.c, partition: 'Bad_Name', namespace: '*', access: read}\n",
			`partition "Bad_Name"`,
		},
		"unknown field": {
			"tokens:\n  - name: a\n    secret: s\n    rulez: []\n",
			`acl.yaml:4: field rulez not found`,
		},
		"no secret": {
			"tokens:\n  - name: a\n    rules: []\n",
			`acl.yaml:2: token "a" has no secret`,
		},
		"no name": {
			"tokens:\n  - secret: s\n",
			`acl.yaml:2: token 1 has no name`,
		},
		"same name": {
			"tokens:\n  - {name: a, secret: s1}\n  - {name: a, secret: s2}\n",
			`acl.yaml:3: token "a" is named twice`,
		},
		"same secret": {
			"tokens:\n  - {name: a, secret: s}\n  - {name: b, secret: s}\n",
			`acl.yaml:3: token "b" has the same secret as another token`,
		},
		"not yaml": {
			"tokens: [\n",
			`acl.yaml:1: did not find expected node content`,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := acl.Parse("acl.yaml", []byte(c.file))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "s1", "an error must not show a secret")
		})
	}
}

func TestParseJSON(t *testing.T) {
	p, err := acl.Parse("acl.json", []byte(`{"tokens": [{"name": "a", "secret": "s",
		"rules": [{"type": "foo.v1.Bar", "partition": "*", "namespace": "*", "access": "read"}]}]}`))
	require.NoError(t, err)
	assert.True(t, token(t, p, "s").Allowed(resource.AccessRead, id("foo.v1.Bar", "default", "default", "b")))
}

func TestSourceResolveAndReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl.yaml")
	require.NoError(t, os.WriteFile(path, []byte(example), 0o600))
	src, err := acl.NewSource(path, nil)
	require.NoError(t, err)

	resolve := func(secret ...string) (resource.Authorizer, error) {
		md := metadata.MD{}
		for _, s := range secret {
			md.Append(resource.TokenMetadataKey, s)
		}
		return src.Resolve(metadata.NewIncomingContext(context.Background(), md))
	}
	_, err = resolve()
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
	_, err = resolve("nope")
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
	assert.NotContains(t, err.Error(), "nope")
	a, err := resolve("reader-secret")
	require.NoError(t, err)
	assert.Equal(t, "reader", a.(*acl.Authorizer).Name())

	// A broken edit keeps the rules in force; a good one replaces them.
	require.NoError(t, os.WriteFile(path, []byte("tokens: [\n"), 0o600))
	changed, err := src.Reload()
	assert.Error(t, err)
	assert.False(t, changed)
	_, err = resolve("reader-secret")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte("tokens:\n  - {name: new, secret: new-secret}\n"), 0o600))
	changed, err = src.Reload()
	require.NoError(t, err)
	assert.True(t, changed)
	_, err = resolve("reader-secret")
	assert.Equal(t, codes.Unauthenticated, status.Code(err))
	_, err = resolve("new-secret")
	require.NoError(t, err)
	changed, err = src.Reload()
	require.NoError(t, err)
	assert.False(t, changed, "an unchanged file is not parsed again")

	_, err = acl.NewSource(filepath.Join(t.TempDir(), "missing.yaml"), nil)
	assert.ErrorContains(t, err, "missing.yaml")
}

func TestCapabilities(t *testing.T) {
	p, err := acl.Parse("acl.yaml", []byte(`tokens:
  - name: leader
    secret: s1
    rules:
      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: write}
      - {capability: fence}
  - name: grpcurl
    secret: s2
    rules:
      - {capability: reflection}
  - name: writer
    secret: s3
    rules:
      - {type: "*.*.*", partition: "*", namespace: "*", access: write}
`))
	require.NoError(t, err)
	leader, grpcurl, writer := token(t, p, "s1"), token(t, p, "s2"), token(t, p, "s3")
	F, R := resource.CapabilityFence, resource.CapabilityReflection
	assert.True(t, leader.AllowedCapability(F))
	assert.False(t, leader.AllowedCapability(R))
	assert.True(t, grpcurl.AllowedCapability(R))
	assert.False(t, grpcurl.AllowedCapability(F))
	assert.False(t, grpcurl.Allowed(resource.AccessRead, id("foo.v1.Bar", "default", "default", "b")), "a capability grants no access")
	assert.False(t, writer.AllowedCapability(F), "write access to everything is no capability")
	assert.False(t, writer.AllowedCapability(R))
	assert.True(t, resource.HasCapability(leader, F))
	assert.True(t, resource.HasCapability(resource.AllowAll, F))
	assert.False(t, resource.HasCapability(resource.DenyAll, F))
	assert.False(t, resource.HasCapability(resource.AuthorizerFunc(func(resource.Access, *pbresource.ID) bool { return true }), F),
		"an Authorizer that does not answer for capabilities grants none")

	for name, c := range map[string]struct{ rule, want string }{
		"unknown":       {"{capability: admin}", `acl.yaml:5: token "a", rule 1: capability "admin" is not fence, reflection or restore`},
		"with a type":   {"{capability: fence, type: a.b.c}", `rule 1: a capability rule has no type, partition, namespace or access`},
		"with access":   {"{capability: fence, access: write}", `a capability rule has no type`},
		"neither":       {"{partition: '*'}", `type is required (a group.version.kind pattern, e.g. "foo.*.Bar"), or a capability (fence or reflection)`},
		"mistyped name": {"{capabilty: fence}", `field capabilty not found`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := acl.Parse("acl.yaml", []byte("tokens:\n  - name: a\n    secret: s\n    rules:\n      - "+c.rule+"\n"))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}
