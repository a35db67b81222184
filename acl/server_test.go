package acl_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/inmem"
)

// TestServerWithACLs runs the ResourceService with an ACL file: deny by
// default, Unauthenticated without a known token, PermissionDenied without
// the access, and List filtered to what the token may read.
func TestServerWithACLs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acl.yaml")
	require.NoError(t, os.WriteFile(path, []byte(example), 0o600))
	src, err := acl.NewSource(path, nil)
	require.NoError(t, err)
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	client := server.NewInProcessClient(server.New(server.Config{Backend: inmem.New(), Registry: reg, ACLResolver: src.Resolve}))

	as := func(secret string) context.Context {
		if secret == "" {
			return context.Background()
		}
		return metadata.AppendToOutgoingContext(context.Background(), resource.TokenMetadataKey, secret)
	}
	write := func(secret, namespace, name string) error {
		data, err := anypb.New(&pbfoov1.Bar{Baz: name})
		require.NoError(t, err)
		_, err = client.Write(as(secret), &pbresource.WriteRequest{Resource: &pbresource.Resource{
			Id: &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: namespace}, Name: name}, Data: data,
		}})
		return err
	}
	require.Equal(t, codes.Unauthenticated, status.Code(write("", "team-a", "a1")))
	require.Equal(t, codes.Unauthenticated, status.Code(write("wrong", "team-a", "a1")))
	require.Equal(t, codes.PermissionDenied, status.Code(write("reader-secret", "team-a", "a1")))
	for _, w := range []struct{ ns, name string }{{"team-a", "a1"}, {"team-a", "a2"}, {"team-b", "b1"}} {
		require.NoError(t, write("7d1c0f3e-example", w.ns, w.name))
	}

	list := func(secret string) ([]string, error) {
		rsp, err := client.List(as(secret), &pbresource.ListRequest{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, r := range rsp.Resources {
			names = append(names, r.Id.Name)
		}
		return names, nil
	}
	names, err := list("reader-secret")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a1", "a2"}, names, "the reader lists only its namespace")
	names, err = list("7d1c0f3e-example")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a1", "a2", "b1"}, names)
	_, err = list("admin-secret")
	require.Equal(t, codes.PermissionDenied, status.Code(err), "no rule lets the admin token list Bars")

	_, err = client.Read(as("reader-secret"), &pbresource.ReadRequest{Id: &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "team-b"}, Name: "b1"}})
	require.Equal(t, codes.PermissionDenied, status.Code(err))
}
