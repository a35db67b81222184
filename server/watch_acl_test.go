package server

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// watchACL is an ACL file whose tokens all may watch Bars; watchACLAfter
// is the same file edited: "gone" removed, "narrowed" no longer allowed to
// list Bars, "changed" still allowed to list them but to read only some,
// "kept" as it was.
const (
	watchACL = `tokens:
  - {name: kept, secret: kept-secret, rules: [{type: "foo.*.Bar", partition: "*", namespace: "*", access: write}]}
  - {name: gone, secret: gone-secret, rules: [{type: "foo.*.Bar", partition: "*", namespace: "*", access: write}]}
  - {name: narrowed, secret: narrowed-secret, rules: [{type: "foo.*.Bar", partition: "*", namespace: "*", access: write}]}
  - {name: changed, secret: changed-secret, rules: [{type: "foo.*.Bar", partition: "*", namespace: "*", access: write}]}
`
	watchACLAfter = `tokens:
  - {name: kept, secret: kept-secret, rules: [{type: "foo.*.Bar", partition: "*", namespace: "*", access: write}]}
  - {name: narrowed, secret: narrowed-secret, rules: [{type: "foo.*.Zip", partition: "*", namespace: "*", access: write}]}
  - {name: changed, secret: changed-secret, rules: [
      {type: "foo.*.Bar", partition: "*", namespace: "*", access: list},
      {type: "foo.*.Bar", partition: "*", namespace: "team-a", access: read}]}
`
)

// aclFileEnv is a server whose ACLs come from a file on disk, which the
// test rewrites and reloads (acl.Source.Reload, as the host's reload loop
// does). With trust, its in-process calls are trusted, as in a host.
func aclFileEnv(t *testing.T, trust bool, opts ...envOption) (env *testEnv, src *acl.Source, rewrite func(string)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acl.yaml")
	rewrite = func(content string) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	}
	rewrite(watchACL)
	src, err := acl.NewSource(path, nil)
	require.NoError(t, err)
	resolve := src.Resolve
	if trust {
		resolve = TrustInProcess(resolve)
	}
	env = newEnv(t, append(opts, withACL(resolve))...)
	src.OnReload(env.server.ReauthorizeWatches)
	return env, src, rewrite
}

// watchAs opens a watch of every Bar as the token secret ("" for none)
// and reads its snapshot of n resources.
func watchAs(t *testing.T, client pbresource.ResourceServiceClient, secret string, batch bool, n int) watchStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if secret != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, resource.TokenMetadataKey, secret)
	}
	stream, err := client.WatchList(ctx, &pbresource.WatchListRequest{
		Type: barID("x").Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}, BatchEvents: batch,
	})
	require.NoError(t, err)
	upserts := 0
	for end := false; !end; {
		ev, err := stream.Recv()
		require.NoError(t, err, "watching as %q", secret)
		for _, e := range batchOf(ev) {
			if e.GetUpsert() != nil {
				upserts++
			}
			end = end || e.GetEndOfSnapshot() != nil
		}
	}
	require.Equal(t, n, upserts, "snapshot of the watch as %q", secret)
	return stream
}

// batchOf returns the events of ev: those of a batch, or ev itself.
func batchOf(ev *pbresource.WatchEvent) []*pbresource.WatchEvent {
	if b := ev.GetBatch(); b != nil {
		return b.Events
	}
	return []*pbresource.WatchEvent{ev}
}

// requireEnds receives from stream until it ends (within the stream's
// deadline) and checks its code.
func requireEnds(t *testing.T, stream watchStream, code codes.Code, who string) {
	t.Helper()
	for {
		_, err := stream.Recv()
		if err != nil {
			require.Equal(t, code.String(), status.Code(err).String(), "%s's stream ended with %v", who, err)
			return
		}
	}
}

// TestWatchEndsWhenACLsChange: on an ACL reload, open watches whose token
// is gone end Unauthenticated, those that may no longer list the type
// PermissionDenied, those whose rules changed otherwise Aborted (watch
// again); a token the reload left alone, and the trusted in-process calls
// of a host, keep their streams. (In process, the tokens are checked only
// where the server does not trust such calls.)
func TestWatchEndsWhenACLsChange(t *testing.T) {
	for _, mode := range []struct {
		name  string
		batch bool
		grpc  bool
	}{{"in-process", false, false}, {"grpc", false, true}, {"grpc batched", true, true}} {
		t.Run(mode.name, func(t *testing.T) {
			env, src, rewrite := aclFileEnv(t, mode.grpc)
			client := env.client
			if mode.grpc {
				client = grpcClient(t, env)
			}
			write := func(name string) { // as a token that keeps its rights
				ctx := metadata.AppendToOutgoingContext(testCtx(t), resource.TokenMetadataKey, "kept-secret")
				_, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, name, "x")})
				require.NoError(t, err)
			}
			write("before")
			streams := map[string]watchStream{}
			for _, token := range []string{"kept", "gone", "narrowed", "changed"} {
				streams[token] = watchAs(t, client, token+"-secret", mode.batch, 1)
			}
			var trusted watchStream
			if mode.grpc {
				trusted = watchAs(t, env.client, "", mode.batch, 1)
			}

			rewrite(watchACLAfter)
			changed, err := src.Reload()
			require.NoError(t, err)
			require.True(t, changed)

			requireEnds(t, streams["gone"], codes.Unauthenticated, "gone")
			requireEnds(t, streams["narrowed"], codes.PermissionDenied, "narrowed")
			requireEnds(t, streams["changed"], codes.Aborted, "changed")
			write("after")
			for name, stream := range map[string]watchStream{"kept": streams["kept"], "trusted": trusted} {
				if stream == nil {
					continue
				}
				ev := recvEvent(t, stream)
				require.Equal(t, "after", batchOf(ev)[0].GetUpsert().GetResource().GetId().GetName(), "%s's stream after the reload", name)
			}
			// A new watch follows the new rules.
			watchAs(t, client, "changed-secret", mode.batch, 0)
		})
	}
}

// TestWatchResolvedDuringReload: a stream whose token was resolved just
// before a reload, and that registers just after it, is checked all the
// same, also on a backend that refuses to open a watch for a context that
// has ended.
func TestWatchResolvedDuringReload(t *testing.T) {
	t.Run("inmem", func(t *testing.T) { testWatchResolvedDuringReload(t) })
	t.Run("strict open", func(t *testing.T) {
		testWatchResolvedDuringReload(t, withBackendWrapper(func(b storage.Backend) storage.Backend { return strictOpen{b} }))
	})
}

// strictOpen is a backend whose WatchList fails when ctx has ended.
type strictOpen struct{ storage.Backend }

func (b strictOpen) WatchList(ctx context.Context, typ storage.UnversionedType, tenancy *pbresource.Tenancy, prefix string) (storage.Watch, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return b.Backend.WatchList(ctx, typ, tenancy, prefix)
}

func testWatchResolvedDuringReload(t *testing.T, opts ...envOption) {
	env, src, rewrite := aclFileEnv(t, false, opts...)
	var reloaded atomic.Bool
	env.server.resolve = func(ctx context.Context) (resource.Authorizer, error) {
		authz, err := src.Resolve(ctx)
		if !reloaded.Swap(true) {
			// The reload lands between this resolution and the stream's
			// registration.
			rewrite(watchACLAfter)
			_, rerr := src.Reload()
			require.NoError(t, rerr)
		}
		return authz, err
	}
	ctx := metadata.AppendToOutgoingContext(testCtx(t), resource.TokenMetadataKey, "gone-secret")
	stream, err := env.client.WatchList(ctx, &pbresource.WatchListRequest{
		Type: barID("x").Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"},
	})
	require.NoError(t, err)
	requireEnds(t, stream, codes.Unauthenticated, "gone")
}
