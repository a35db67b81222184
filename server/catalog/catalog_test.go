package catalog_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbcatalogv1 "github.com/loomrt/loom/proto/pbcatalog/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
)

// The tokens of the tests: admin may write everything, reader only read
// and list, team-a read and list in namespace a, foo-only write the foo
// group. A call without a token is the test's own: allowed everything.
const policy = `tokens:
  - name: admin
    secret: admin-secret
    rules:
      - {type: "*.*.*", partition: "*", namespace: "*", access: write}
  - name: reader
    secret: reader-secret
    rules:
      - {type: "*.*.*", partition: "*", namespace: "*", access: read}
      - {type: "*.*.*", partition: "*", namespace: "*", access: list}
  - name: team-a
    secret: team-a-secret
    rules:
      - {type: "*.*.*", partition: "*", namespace: "a", access: list}
  - name: foo-only
    secret: foo-secret
    rules:
      - {type: "foo.*.*", partition: "*", namespace: "*", access: write}
`

func start(t *testing.T) *resourcetest.Service {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acl.yaml")
	require.NoError(t, os.WriteFile(path, []byte(policy), 0o600))
	src, err := acl.NewSource(path, nil)
	require.NoError(t, err)
	resolve := func(ctx context.Context) (resource.Authorizer, error) {
		if len(metadata.ValueFromIncomingContext(ctx, resource.TokenMetadataKey)) == 0 {
			return resource.AllowAll, nil
		}
		return src.Resolve(ctx)
	}
	return resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes),
		resourcetest.WithACLResolver(resolve), resourcetest.OverGRPC())
}

func as(t *testing.T, secret string) context.Context {
	return metadata.AppendToOutgoingContext(t.Context(), resource.TokenMetadataKey, secret)
}

// access is a type's READ, LIST and WRITE answers.
type access struct{ read, list, write bool }

func accessByType(t *testing.T, svc *resourcetest.Service, ctx context.Context) map[string]access {
	t.Helper()
	resp, err := svc.Catalog.ListTypes(ctx, &pbcatalogv1.ListTypesRequest{})
	require.NoError(t, err)
	out := map[string]access{}
	for _, ti := range resp.Types {
		out[resource.TypeString(ti.Type)] = access{ti.Read, ti.List, ti.Write}
	}
	return out
}

func TestListTypes(t *testing.T) {
	svc := start(t)
	resp, err := svc.Catalog.ListTypes(as(t, "admin-secret"), &pbcatalogv1.ListTypesRequest{})
	require.NoError(t, err)
	var got []*pbcatalogv1.TypeInfo
	for _, ti := range resp.Types {
		if ti.Type.Kind == "Bar" || ti.Type.Kind == "Qux" || ti.Type.Kind == "Tombstone" {
			got = append(got, ti)
		}
	}
	want := []*pbcatalogv1.TypeInfo{
		{Type: foo.BarV1Type, Scope: "namespace", Message: "loom.example.foo.v1.Bar", Read: true, List: true, Write: true},
		{Type: foo.BarV2Type, Scope: "namespace", Message: "loom.example.foo.v2.Bar", Read: true, List: true, Write: true},
		{Type: foo.QuxType, Scope: "cluster", Message: "loom.example.foo.v1.Qux", Read: true, List: true, Write: true},
		{Type: resource.TypeV1Tombstone, Scope: "namespace", Message: "hashicorp.consul.resource.Tombstone", Read: true, List: true, Write: true},
	}
	require.Equal(t, texts(want), texts(got))
}

// texts renders messages for comparison.
func texts[M proto.Message](msgs []M) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = prototext.Format(m)
	}
	return out
}

// TestListTypesACL: each token's access as the types' ACL checks answer.
func TestListTypesACL(t *testing.T) {
	svc := start(t)
	reader := accessByType(t, svc, as(t, "reader-secret"))
	require.NotEmpty(t, reader)
	for typ, a := range reader {
		require.Equal(t, access{read: true, list: true}, a, "reader on %s", typ)
	}
	fooOnly := accessByType(t, svc, as(t, "foo-secret"))
	require.Equal(t, access{read: true, list: true, write: true}, fooOnly["foo.v1.Bar"])
	require.Equal(t, access{}, fooOnly["resource.v1.Tombstone"])
	// Namespace a is not the default tenancy the answers are about.
	require.Equal(t, access{}, accessByType(t, svc, as(t, "team-a-secret"))["foo.v1.Bar"])

	_, err := svc.Catalog.ListTypes(as(t, "no-such-secret"), &pbcatalogv1.ListTypesRequest{})
	require.Equal(t, codes.Unauthenticated.String(), status.Code(err).String())
}

// TestGetStats: counts by type and by tenancy, with marked resources and
// tombstones, as each token may list them.
func TestGetStats(t *testing.T) {
	svc := start(t)
	bar := func(ns, name string) *resourcetest.ResourceBuilder {
		return svc.Resource(foo.BarV1Type, name).WithData(t, &pbfoov1.Bar{Baz: "x"}).
			WithTenancy(&pbresource.Tenancy{Partition: "default", Namespace: ns})
	}
	bar("default", "b1").Write(t, svc.Client)
	bar("a", "b2").Write(t, svc.Client)
	marked := bar("a", "b3").WithMeta("finalizers", "test/keep").Write(t, svc.Client)
	_, err := svc.Client.Delete(t.Context(), &pbresource.DeleteRequest{Id: marked.Id})
	require.NoError(t, err)
	parent := bar("default", "parent").Write(t, svc.Client)
	bar("default", "child").WithOwner(parent.Id).Write(t, svc.Client)
	_, err = svc.Client.Delete(t.Context(), &pbresource.DeleteRequest{Id: parent.Id})
	require.NoError(t, err)

	stats := func(ctx context.Context, req *pbcatalogv1.GetStatsRequest) *pbcatalogv1.GetStatsResponse {
		t.Helper()
		resp, err := svc.Catalog.GetStats(ctx, req)
		require.NoError(t, err)
		return resp
	}
	barCount := func(ns string, n, marked int64) *pbcatalogv1.TypeCount {
		c := &pbcatalogv1.TypeCount{Type: &pbresource.Type{Group: "foo", Kind: "Bar"}, Resources: n, MarkedForDeletion: marked}
		if ns != "" {
			c.Tenancy = &pbresource.Tenancy{Partition: "default", Namespace: ns}
		}
		return c
	}
	tombstones := &pbcatalogv1.TypeCount{Type: &pbresource.Type{Group: "resource", Kind: "Tombstone"}, Resources: 1}

	got := stats(as(t, "reader-secret"), &pbcatalogv1.GetStatsRequest{})
	require.Equal(t, texts([]*pbcatalogv1.TypeCount{barCount("", 4, 1), tombstones}), texts(got.Counts))
	require.EqualValues(t, 1, got.Tombstones)

	got = stats(as(t, "reader-secret"), &pbcatalogv1.GetStatsRequest{ByTenancy: true, Type: foo.BarV2Type})
	require.Equal(t, texts([]*pbcatalogv1.TypeCount{barCount("a", 2, 1), barCount("default", 2, 0)}), texts(got.Counts))
	require.Zero(t, got.Tombstones)

	// team-a may list namespace a only: the rest is left out.
	got = stats(as(t, "team-a-secret"), &pbcatalogv1.GetStatsRequest{})
	require.Equal(t, texts([]*pbcatalogv1.TypeCount{barCount("", 2, 1)}), texts(got.Counts))
	require.Zero(t, got.Tombstones)
}
