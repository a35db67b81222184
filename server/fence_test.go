package server

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// fenceSpy records the fence on the context of every backend write and,
// like a fencing backend, refuses fenced writes whose revision is below
// current (a term that has ended).
type fenceSpy struct {
	storage.Backend
	mu      sync.Mutex
	current int64
	writes  []fenceSeen
}

type fenceSeen struct {
	op     string // "write" or "delete"
	name   string
	fence  storage.Fence
	fenced bool
}

func (s *fenceSpy) record(ctx context.Context, op, name string) error {
	f, ok := storage.FenceFrom(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, fenceSeen{op: op, name: name, fence: f, fenced: ok})
	if ok && f.Revision < s.current {
		return storage.ErrFenced
	}
	return nil
}

func (s *fenceSpy) WriteCAS(ctx context.Context, res *pbresource.Resource) (*pbresource.Resource, error) {
	if err := s.record(ctx, "write", res.GetId().GetName()); err != nil {
		return nil, err
	}
	return s.Backend.WriteCAS(ctx, res)
}

func (s *fenceSpy) DeleteCAS(ctx context.Context, id *pbresource.ID, version string, opts ...storage.DeleteOption) error {
	if err := s.record(ctx, "delete", id.GetName()); err != nil {
		return err
	}
	return s.Backend.DeleteCAS(ctx, id, version, opts...)
}

// take returns the writes recorded since the last call.
func (s *fenceSpy) take() []fenceSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.writes
	s.writes = nil
	return out
}

func (s *fenceSpy) setCurrent(rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current = rev
}

// TestFence_ReachesBackend checks that the fence metadata of Write,
// WriteStatus and Delete reaches every backend write the request makes,
// in process and over gRPC, and that requests without it are not fenced.
func TestFence_ReachesBackend(t *testing.T) {
	spy := &fenceSpy{}
	env := newEnv(t, withBackendWrapper(func(b storage.Backend) storage.Backend { spy.Backend = b; return spy }))
	want := storage.Fence{Key: "/loom/leader/694d9a1b2c3d4e5f", Revision: 42}

	for name, client := range map[string]pbresource.ResourceServiceClient{
		"in-process": env.client,
		"grpc":       grpcClient(t, env),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			fenced := metadata.AppendToOutgoingContext(ctx, resource.FenceMetadataKey, resource.FormatFence(want.Key, want.Revision))
			requireAll := func(what string, n int) {
				t.Helper()
				seen := spy.take()
				require.Len(t, seen, n, what)
				for _, w := range seen {
					require.True(t, w.fenced, "%s: %s of %s was not fenced", what, w.op, w.name)
					require.Equal(t, want, w.fence, what)
				}
			}

			// Unfenced requests stay unfenced.
			owner, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "owner-"+name, "x")})
			require.NoError(t, err)
			seen := spy.take()
			require.Len(t, seen, 1)
			require.False(t, seen[0].fenced)

			// Write: create and update.
			child := bar(t, "child-"+name, "x")
			child.Owner = owner.Resource.Id
			created, err := client.Write(fenced, &pbresource.WriteRequest{Resource: child})
			require.NoError(t, err)
			requireAll("create", 1)
			upd := bar(t, "child-"+name, "y")
			upd.Owner = owner.Resource.Id
			_, err = client.Write(fenced, &pbresource.WriteRequest{Resource: upd})
			require.NoError(t, err)
			requireAll("update", 1)

			// WriteStatus.
			_, err = client.WriteStatus(fenced, &pbresource.WriteStatusRequest{
				Id: created.Resource.Id, Key: "test", Status: simpleStatus(created.Resource.Generation),
			})
			require.NoError(t, err)
			requireAll("write status", 1)

			// Delete of an owner: one fenced backend delete, which stores
			// the tombstone in the same step.
			_, err = client.Delete(fenced, &pbresource.DeleteRequest{Id: owner.Resource.Id})
			require.NoError(t, err)
			requireAll("delete with a tombstone", 1)
			_, err = env.client.Read(ctx, &pbresource.ReadRequest{Id: TombstoneID(owner.Resource.Id)})
			require.NoError(t, err, "the delete left a tombstone")

			// Marking a resource with finalizers for deletion, then
			// removing the last finalizer, which deletes it.
			withFin := bar(t, "fin-"+name, "x")
			withFin.Metadata = map[string]string{resource.FinalizerKey: "f"}
			fin, err := client.Write(fenced, &pbresource.WriteRequest{Resource: withFin})
			require.NoError(t, err)
			requireAll("create with a finalizer", 1)
			_, err = client.Delete(fenced, &pbresource.DeleteRequest{Id: fin.Resource.Id})
			require.NoError(t, err)
			requireAll("mark for deletion", 1)
			marked := env.mustRead(t, fin.Resource.Id)
			marked.Metadata = map[string]string{resource.DeletionTimestampKey: marked.Metadata[resource.DeletionTimestampKey]}
			_, err = client.Write(fenced, &pbresource.WriteRequest{Resource: marked})
			require.NoError(t, err)
			requireAll("last finalizer removed", 1)
		})
	}
}

// TestFence_Refused checks what the caller of a fenced write sees when the
// backend refuses it: FailedPrecondition, at once (a blanket write is not
// retried), and nothing written; and that the server logs a warning.
func TestFence_Refused(t *testing.T) {
	spy := &fenceSpy{}
	log := &testlog.Buffer{}
	env := newEnv(t, withBackendWrapper(func(b storage.Backend) storage.Backend { spy.Backend = b; return spy }),
		withLogger(hclog.New(&hclog.LoggerOptions{Output: log, Level: hclog.Warn})))
	existing := env.write(t, bar(t, "existing", "x"))
	spy.take()
	spy.setCurrent(8)
	ctx := testCtx(t)
	stale := metadata.AppendToOutgoingContext(ctx, resource.FenceMetadataKey, resource.FormatFence("/loom/leader/a", 7))

	_, err := env.client.Write(stale, &pbresource.WriteRequest{Resource: bar(t, "new", "x")})
	requireCode(t, err, codes.FailedPrecondition, "write fenced: leadership has moved")
	require.Len(t, spy.take(), 1, "a fenced write is not retried")
	require.Contains(t, log.String(), "[WARN]  write refused by the fence: its leadership term has ended: method=Write id=foo.v1.Bar/default.default/new")
	_, err = env.read(t, barID("new"))
	requireCode(t, err, codes.NotFound)

	_, err = env.client.Write(stale, &pbresource.WriteRequest{Resource: bar(t, "existing", "changed")})
	requireCode(t, err, codes.FailedPrecondition, "write fenced")
	require.Len(t, spy.take(), 1, "a fenced write is not retried")

	_, err = env.client.WriteStatus(stale, &pbresource.WriteStatusRequest{
		Id: existing.Id, Key: "test", Status: simpleStatus(existing.Generation),
	})
	requireCode(t, err, codes.FailedPrecondition, "write fenced")
	_, err = env.client.Delete(stale, &pbresource.DeleteRequest{Id: existing.Id})
	requireCode(t, err, codes.FailedPrecondition, "write fenced")
	require.Len(t, spy.take(), 2)
	require.Equal(t, existing.Version, env.mustRead(t, existing.Id).Version, "nothing was written")

	// The current term's writes land.
	current := metadata.AppendToOutgoingContext(ctx, resource.FenceMetadataKey, resource.FormatFence("/loom/leader/b", 8))
	_, err = env.client.Delete(current, &pbresource.DeleteRequest{Id: existing.Id})
	require.NoError(t, err)
}

// TestFence_Malformed checks that a fence the server cannot read fails the
// request instead of being dropped.
func TestFence_Malformed(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)
	for _, values := range [][]string{
		{"42"}, {"@/loom/leader/a"}, {"x@/loom/leader/a"}, {"0@/loom/leader/a"}, {"-3@/k"}, {"42@"},
		{"1@/a", "2@/b"},
	} {
		var kv []string
		for _, v := range values {
			kv = append(kv, resource.FenceMetadataKey, v)
		}
		mctx := metadata.AppendToOutgoingContext(ctx, kv...)
		_, err := env.client.Write(mctx, &pbresource.WriteRequest{Resource: bar(t, "a", "x")})
		requireCode(t, err, codes.InvalidArgument, resource.FenceMetadataKey)
		_, err = env.client.WriteStatus(mctx, &pbresource.WriteStatusRequest{Id: barID("a"), Key: "k", Status: simpleStatus("g")})
		requireCode(t, err, codes.InvalidArgument, resource.FenceMetadataKey)
		_, err = env.client.Delete(mctx, &pbresource.DeleteRequest{Id: barID("a")})
		requireCode(t, err, codes.InvalidArgument, resource.FenceMetadataKey)
	}
	// The key may contain '@'.
	key, rev, err := resource.ParseFence(resource.FormatFence("/a@b", 9))
	require.NoError(t, err)
	require.Equal(t, "/a@b", key)
	require.EqualValues(t, 9, rev)
}

// checkingSpy is a fenceSpy whose backend, like etcd's, accepts fences
// only for keys under /loom/leader/.
type checkingSpy struct{ *fenceSpy }

func (s checkingSpy) CheckFence(f storage.Fence) error {
	if !strings.HasPrefix(f.Key, "/loom/leader/") {
		return fmt.Errorf("%w: want a key under /loom/leader", storage.ErrInvalidFence)
	}
	return nil
}

// TestFence_OnlyLeaderKeysAndCallers checks that a fence is a question the
// server asks the backend only about its leader keys and only for callers
// allowed to present fences: another key is InvalidArgument, a caller
// without resource.CapabilityFence PermissionDenied, and neither reaches
// the backend, whether or not the resource exists.
func TestFence_OnlyLeaderKeysAndCallers(t *testing.T) {
	spy := &fenceSpy{}
	mayFence := true
	env := newEnv(t,
		withBackendWrapper(func(b storage.Backend) storage.Backend { spy.Backend = b; return checkingSpy{spy} }),
		withACL(func(context.Context) (resource.Authorizer, error) {
			if mayFence {
				return resource.AllowAll, nil
			}
			return resource.AuthorizerFunc(func(resource.Access, *pbresource.ID) bool { return true }), nil
		}))
	existing := env.write(t, bar(t, "existing", "x"))
	spy.take()
	ctx := testCtx(t)
	as := func(key string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, resource.FenceMetadataKey, resource.FormatFence(key, 5))
	}
	calls := func(fctx context.Context) map[string]error {
		out := map[string]error{}
		for _, name := range []string{"existing", "missing"} {
			_, out["Write "+name] = env.client.Write(fctx, &pbresource.WriteRequest{Resource: bar(t, name, "y")})
			_, out["Delete "+name] = env.client.Delete(fctx, &pbresource.DeleteRequest{Id: barID(name)})
		}
		_, out["WriteStatus"] = env.client.WriteStatus(fctx, &pbresource.WriteStatusRequest{
			Id: existing.Id, Key: "k", Status: simpleStatus(existing.Generation)})
		return out
	}

	for _, key := range []string{"/loom/r/foo/Bar/default/default/existing", "/other-app/secret", "/loom/leaderx/1"} {
		errs := calls(as(key))
		for _, err := range errs {
			requireCode(t, err, codes.InvalidArgument, resource.FenceMetadataKey, "not a leader key")
		}
		require.Equal(t, errs["Write existing"].Error(), errs["Write missing"].Error(), "the answer tells nothing about the resource")
		require.Equal(t, errs["Delete existing"].Error(), errs["Delete missing"].Error(), "the answer tells nothing about the resource")
	}
	require.Empty(t, spy.take(), "no refused fence reached the backend")

	mayFence = false
	for _, key := range []string{"/loom/leader/a", "/other-app/secret"} {
		for _, err := range calls(as(key)) {
			requireCode(t, err, codes.PermissionDenied, "may not present a fence", "{capability: fence}")
		}
	}
	require.Empty(t, spy.take(), "no refused fence reached the backend")
	_, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "existing", "unfenced")})
	require.NoError(t, err, "without a fence the caller writes")

	mayFence = true
	_, err = env.client.Write(as("/loom/leader/a"), &pbresource.WriteRequest{Resource: bar(t, "existing", "fenced")})
	require.NoError(t, err)
	require.Len(t, spy.take(), 2)
}
