package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

func TestACL_DenyAll(t *testing.T) {
	env := newEnv(t)
	stored := env.write(t, bar(t, "a", "x"))
	denied := New(Config{
		Backend:     env.server.backend,
		Registry:    env.registry,
		ACLResolver: func(context.Context) (resource.Authorizer, error) { return resource.DenyAll, nil },
	})
	c := NewInProcessClient(denied)
	ctx := testCtx(t)

	calls := map[string]func() error{
		"Read":         func() error { _, err := c.Read(ctx, &pbresource.ReadRequest{Id: barID("a")}); return err },
		"Read missing": func() error { _, err := c.Read(ctx, &pbresource.ReadRequest{Id: barID("nope")}); return err },
		"Read other GroupVersion": func() error {
			_, err := c.Read(ctx, &pbresource.ReadRequest{Id: barV2ID("a")})
			return err
		},
		"Write":        func() error { _, err := c.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "a", "y")}); return err },
		"Write create": func() error { _, err := c.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "b", "y")}); return err },
		"WriteStatus": func() error {
			_, err := c.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: simpleStatus(stored.Generation)})
			return err
		},
		"WriteStatus missing": func() error {
			id := barID("nope")
			id.Uid = stored.Id.Uid
			_, err := c.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: id, Key: "k", Status: simpleStatus(stored.Generation)})
			return err
		},
		"Delete":         func() error { _, err := c.Delete(ctx, &pbresource.DeleteRequest{Id: barID("a")}); return err },
		"Delete missing": func() error { _, err := c.Delete(ctx, &pbresource.DeleteRequest{Id: barID("nope")}); return err },
		"List":           func() error { _, err := c.List(ctx, &pbresource.ListRequest{Type: barID("a").Type}); return err },
		"MutateAndValidate": func() error {
			_, err := c.MutateAndValidate(ctx, &pbresource.MutateAndValidateRequest{Resource: bar(t, "a", "y")})
			return err
		},
		"WatchList": func() error {
			s, err := c.WatchList(ctx, &pbresource.WatchListRequest{Type: barID("a").Type})
			require.NoError(t, err)
			_, err = s.Recv()
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			requireCode(t, call(), codes.PermissionDenied)
		})
	}
	// ListByOwner needs list access to the owner's type, as on Consul.
	_, err := c.ListByOwner(ctx, &pbresource.ListByOwnerRequest{Owner: stored.Id})
	requireCode(t, err, codes.PermissionDenied, "list access to foo.v1.Bar")

	got := env.mustRead(t, barID("a"))
	require.Equal(t, stored.Version, got.Version, "nothing was written")
}

// readFilter allows everything except reading resources whose name starts
// with "secret".
var readFilter = resource.AuthorizerFunc(func(a resource.Access, id *pbresource.ID) bool {
	return a != resource.AccessRead || !strings.HasPrefix(id.Name, "secret")
})

func TestACL_ReadFiltersLists(t *testing.T) {
	env := newEnv(t, withACL(func(context.Context) (resource.Authorizer, error) { return readFilter, nil }))
	owner := env.write(t, zip(t, "owner"))
	for _, name := range []string{"public-1", "secret-1", "public-2", "secret-2"} {
		r := bar(t, name, "x")
		r.Owner = owner.Id
		env.write(t, r)
	}
	names := func(rs []*pbresource.Resource) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Id.Name)
		}
		return out
	}
	l, err := env.client.List(testCtx(t), &pbresource.ListRequest{Type: barID("a").Type})
	require.NoError(t, err)
	require.Equal(t, []string{"public-1", "public-2"}, names(l.Resources))

	lo, err := env.client.ListByOwner(testCtx(t), &pbresource.ListByOwnerRequest{Owner: owner.Id})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"public-1", "public-2"}, names(lo.Resources))

	_, err = env.read(t, barID("secret-1"))
	requireCode(t, err, codes.PermissionDenied)
	_, err = env.read(t, barID("secret-missing"))
	requireCode(t, err, codes.PermissionDenied, "permission denied")
	_, err = env.read(t, barID("public-missing"))
	requireCode(t, err, codes.NotFound)
}

func TestACL_Hooks(t *testing.T) {
	env := newEnv(t)
	var seen []string
	typ := &pbresource.Type{Group: "acl", GroupVersion: "v1", Kind: "Guarded"}
	resource.MustRegister(env.registry, resource.Registration[*pbfoov1.Qux]{
		Type:  typ,
		Scope: resource.ScopeCluster,
		ACLs: &resource.ACLHooks[*pbfoov1.Qux]{
			Read: func(_ resource.Authorizer, id *pbresource.ID, res *resource.Decoded[*pbfoov1.Qux]) error {
				seen = append(seen, fmt.Sprintf("read %s exists=%v", id.Name, res != nil))
				if id.Name == "locked" {
					return fmt.Errorf("wrapped: %w", resource.ErrPermissionDenied)
				}
				return nil
			},
			Write: func(_ resource.Authorizer, res *resource.Decoded[*pbfoov1.Qux]) error {
				seen = append(seen, "write "+res.Resource.Id.Name)
				switch res.Resource.Id.Name {
				case "locked":
					return resource.ErrPermissionDenied
				case "broken":
					return errors.New("acl backend down")
				case "unauth":
					return status.Error(codes.Unauthenticated, "who are you")
				}
				return nil
			},
			List: func(resource.Authorizer, *pbresource.Tenancy) error {
				seen = append(seen, "list")
				return nil
			},
		},
	})
	w := func(name string) error {
		_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: &pbresource.Resource{
			Id: &pbresource.ID{Type: typ, Name: name}, Data: mustAny(t, &pbfoov1.Qux{}),
		}})
		return err
	}
	require.NoError(t, w("open"))
	requireCode(t, w("locked"), codes.PermissionDenied)
	requireCode(t, w("broken"), codes.Internal, "acl backend down")
	requireCode(t, w("unauth"), codes.Unauthenticated)

	_, err := env.read(t, &pbresource.ID{Type: typ, Name: "missing"})
	requireCode(t, err, codes.NotFound)
	_, err = env.read(t, &pbresource.ID{Type: typ, Name: "locked"})
	requireCode(t, err, codes.PermissionDenied)
	_, err = env.client.List(testCtx(t), &pbresource.ListRequest{Type: typ})
	require.NoError(t, err)
	require.Contains(t, seen, "read missing exists=false")
	require.Contains(t, seen, "list")
	require.Contains(t, seen, "read open exists=true")
}

func TestACL_ResolverErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		code codes.Code
	}{
		"status":            {status.Error(codes.Unauthenticated, "bad token"), codes.Unauthenticated},
		"permission denied": {fmt.Errorf("token: %w", resource.ErrPermissionDenied), codes.PermissionDenied},
		"other":             {errors.New("boom"), codes.Internal},
	} {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t, withACL(func(context.Context) (resource.Authorizer, error) { return nil, tc.err }))
			_, err := env.read(t, barID("a"))
			requireCode(t, err, tc.code)
		})
	}
}

// TestTrustInProcess checks that a server whose resolver trusts in-process
// calls serves its own in-process clients whatever the resolver says, and
// that a network caller cannot pose as one.
func TestTrustInProcess(t *testing.T) {
	denied := status.Error(codes.Unauthenticated, "no token")
	env := newEnv(t, withACL(TrustInProcess(func(ctx context.Context) (resource.Authorizer, error) {
		if InProcess(ctx) {
			t.Error("the resolver was asked about an in-process call")
		}
		return nil, denied
	})))
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: bar(t, "in-process", "x")})
	require.NoError(t, err, "an in-process call is trusted")

	remote := grpcClient(t, env)
	ctx := metadata.AppendToOutgoingContext(testCtx(t), "x-loom-in-process", "true")
	_, err = remote.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "remote", "x")})
	requireCode(t, err, codes.Unauthenticated)
	_, err = remote.Read(ctx, &pbresource.ReadRequest{Id: barID("in-process")})
	requireCode(t, err, codes.Unauthenticated)
}

// TestCallerClient checks that a client from NewCallerClient is not
// trusted as the server's own in-process clients are: its calls are
// checked against the token of their outgoing metadata.
func TestCallerClient(t *testing.T) {
	env := newEnv(t, withACL(TrustInProcess(func(ctx context.Context) (resource.Authorizer, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if tok := md.Get(resource.TokenMetadataKey); len(tok) == 1 && tok[0] == "reader" {
			return resource.AllowAll, nil
		}
		return nil, status.Error(codes.Unauthenticated, "no token")
	})))
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: bar(t, "a", "x")})
	require.NoError(t, err)

	caller := NewCallerClient(env.server)
	_, err = caller.Read(testCtx(t), &pbresource.ReadRequest{Id: barID("a")})
	requireCode(t, err, codes.Unauthenticated)
	ctx := metadata.AppendToOutgoingContext(testCtx(t), resource.TokenMetadataKey, "reader")
	_, err = caller.Read(ctx, &pbresource.ReadRequest{Id: barID("a")})
	require.NoError(t, err, "the caller's token is checked")
}
