package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// listBoundEnv is a server whose List responses are bounded to 16 KiB,
// holding 40 Bars of about 1 KiB (named big-00...) owned by one Zip, and
// one small Bar named small. backendWrap (nil: none) wraps its backend.
func listBoundEnv(t *testing.T, backendWrap func(storage.Backend) storage.Backend) (*testEnv, *pbresource.Resource) {
	var opts []envOption
	if backendWrap != nil {
		opts = append(opts, withBackendWrapper(backendWrap))
	}
	env := newEnv(t, opts...)
	env.server.limits.listBytes = 16 << 10
	owner := env.write(t, zip(t, "owner"))
	for i := range 40 {
		r := bar(t, fmt.Sprintf("big-%02d", i), strings.Repeat("x", 1<<10))
		r.Owner = owner.Id
		env.write(t, r)
	}
	env.write(t, bar(t, "small", "x"))
	return env, owner
}

// TestListBytesBound: an unpaged List or ListByOwner whose answer would
// be over the bound is ResourceExhausted, telling the client to page, and
// leaves no slot taken; a smaller answer is served whole; a page ends
// early at the bound, with a token, and paging gets everything. Paged
// backends and backends that cannot page alike.
func TestListBytesBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		wrap func(storage.Backend) storage.Backend
	}{
		{"paged-backend", nil},
		{"unpaged-backend", func(b storage.Backend) storage.Backend { return ownerUnpagedBackend{b} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, owner := listBoundEnv(t, tc.wrap)
			env.server.limits.largeList = 4 << 10
			client := grpcClient(t, env)
			ctx := testCtx(t)

			_, err := client.List(ctx, barList(0, ""))
			requireCode(t, err, codes.ResourceExhausted, "page_size")
			require.Less(t, len(status.Convert(err).Message()), 200, "a short error")
			_, err = client.ListByOwner(ctx, &pbresource.ListByOwnerRequest{Owner: owner.Id})
			requireCode(t, err, codes.ResourceExhausted, "page_size")
			require.Empty(t, env.server.largeLists, "a refused List gives its slot back")

			// A reasonably sized type (here: a prefix) is answered whole.
			req := barList(0, "")
			req.NamePrefix = "sm"
			small, err := client.List(ctx, req)
			require.NoError(t, err)
			require.Len(t, small.Resources, 1)

			if tc.wrap != nil {
				return // such a backend answers in one page
			}
			page, err := client.List(ctx, barList(100, ""))
			require.NoError(t, err)
			require.NotEmpty(t, page.NextPageToken, "a page ends at the bound")
			require.Less(t, len(page.Resources), 16)
			require.Greater(t, len(page.Resources), 8)
			names := map[string]bool{}
			for req := barList(100, ""); ; {
				rsp, err := client.List(ctx, req)
				require.NoError(t, err)
				for _, r := range rsp.Resources {
					require.False(t, names[r.Id.Name], "%s twice", r.Id.Name)
					names[r.Id.Name] = true
				}
				if rsp.NextPageToken == "" {
					break
				}
				req.PageToken = rsp.NextPageToken
			}
			require.Len(t, names, 41)
			require.Empty(t, env.server.largeLists)
		})
	}
}

// TestLargeListsBound: while MaxLargeLists large Lists are being built,
// another large one waits, then is ResourceExhausted; a small one is
// served at once; once the slot is free, the large one is served.
func TestLargeListsBound(t *testing.T) {
	block, entered := make(chan struct{}), make(chan struct{}, 1)
	// The ACL check of the last Bar holds the List that reaches it, when
	// its token says so.
	authz := func(ctx context.Context) (resource.Authorizer, error) {
		hold := len(metadata.ValueFromIncomingContext(ctx, "hold")) > 0
		return resource.AuthorizerFunc(func(a resource.Access, id *pbresource.ID) bool {
			if hold && a == resource.AccessRead && id.Name == "big-39" {
				entered <- struct{}{}
				<-block
			}
			return true
		}), nil
	}
	env, _ := listBoundEnv(t, nil)
	env.server.resolve = authz
	env.server.limits.listBytes = 1 << 20
	env.server.limits.largeList = 4 << 10
	env.server.limits.largeListWait = 50 * time.Millisecond
	env.server.largeLists = make(chan struct{}, 1)
	client := grpcClient(t, env)
	ctx := testCtx(t)

	held := make(chan error, 1)
	go func() {
		_, err := client.List(metadata.AppendToOutgoingContext(ctx, "hold", "1"), barList(0, ""))
		held <- err
	}()
	select {
	case <-entered:
	case <-ctx.Done():
		t.Fatal("the first List did not reach its last resource")
	}
	_, err := client.List(ctx, barList(0, ""))
	requireCode(t, err, codes.ResourceExhausted, "large Lists")
	req := barList(0, "")
	req.NamePrefix = "big-0" // 10 KiB: large
	_, err = client.List(ctx, req)
	requireCode(t, err, codes.ResourceExhausted, "large Lists")
	req.NamePrefix = "big-00" // 1 KiB: small
	rsp, err := client.List(ctx, req)
	require.NoError(t, err)
	require.Len(t, rsp.Resources, 1)

	close(block)
	require.NoError(t, <-held)
	whole, err := client.List(ctx, barList(0, ""))
	require.NoError(t, err)
	require.Len(t, whole.Resources, 41)
	require.Empty(t, env.server.largeLists)
}

func TestListBoundDefaults(t *testing.T) {
	s := New(Config{Backend: newEnv(t).backend})
	require.Equal(t, DefaultMaxListBytes, s.limits.listBytes)
	require.Equal(t, LargeListBytes, s.limits.largeList)
	require.Equal(t, DefaultMaxLargeLists, cap(s.largeLists))
	s = New(Config{Backend: newEnv(t).backend, MaxListBytes: 1 << 20, MaxLargeLists: 2})
	require.Equal(t, 1<<20, s.limits.largeList, "a bound below LargeListBytes makes every List at it large")
	require.Equal(t, 2, cap(s.largeLists))
	require.Panics(t, func() { New(Config{Backend: s.backend, MaxLargeLists: -1}) })
}
