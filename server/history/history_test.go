package history_test

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/history"
	"github.com/loomrt/loom/storage"
)

// The tokens of the tests: admin may write everything, reader only read
// and list. A call without a token is the server's own (the reaper's):
// allowed everything, with no name.
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
      - {type: "*.*.*", partition: "*", namespace: "a", access: read}
      - {type: "*.*.*", partition: "*", namespace: "a", access: list}
  - name: foo-only
    secret: foo-secret
    rules:
      - {type: "foo.*.*", partition: "*", namespace: "*", access: write}
`

// widgetType is the tests' type with hooks they can watch: Mutate counts
// its calls, Validate refuses the zap in blocked.
var widgetType = &pbresource.Type{Group: "test", GroupVersion: "v1", Kind: "Widget"}

type env struct {
	svc     *resourcetest.Service
	client  *resourcetest.Client
	history pbhistoryv1.HistoryServiceClient
	mutates atomic.Int64
	// onMutate, when set, is called (once) by the next Mutate.
	onMutate atomic.Pointer[func()]
	blocked  atomic.Pointer[string]
}

func newEnv(t *testing.T) *env {
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
	e := new(env)
	e.blocked.Store(new(string))
	e.svc = resourcetest.StartService(t,
		resourcetest.WithTypes(foo.RegisterTypes, e.registerWidget),
		resourcetest.WithACLResolver(resolve),
		resourcetest.OverGRPC(),
		resourcetest.WithBuiltinControllers(),
	)
	e.client, e.history = resourcetest.NewClient(e.svc.Client), e.svc.History
	return e
}

func (e *env) registerWidget(r resource.Registry) error {
	return resource.Register(r, resource.Registration[*pbfoov1.Zip]{
		Type:  widgetType,
		Scope: resource.ScopeNamespace,
		Mutate: func(*resource.Decoded[*pbfoov1.Zip]) error {
			e.mutates.Add(1)
			if f := e.onMutate.Swap(nil); f != nil {
				(*f)()
			}
			return nil
		},
		Validate: func(res *resource.Decoded[*pbfoov1.Zip]) error {
			if b := *e.blocked.Load(); b != "" && res.Data.Zap == b {
				return resource.ErrInvalidField{Name: "zap", Wrapped: status.Error(codes.InvalidArgument, "blocked")}
			}
			return nil
		},
	})
}

func as(t *testing.T, secret string) context.Context {
	return metadata.AppendToOutgoingContext(t.Context(), resource.TokenMetadataKey, secret)
}

func admin(t *testing.T) context.Context  { return as(t, "admin-secret") }
func reader(t *testing.T) context.Context { return as(t, "reader-secret") }

func id(typ *pbresource.Type, name string) *pbresource.ID {
	return &pbresource.ID{Type: typ, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name}
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	require.NoError(t, err)
	return a
}

func (e *env) write(t *testing.T, ctx context.Context, res *pbresource.Resource) *pbresource.Resource {
	t.Helper()
	out, err := e.svc.Client.Write(ctx, &pbresource.WriteRequest{Resource: res})
	require.NoError(t, err)
	return out.Resource
}

func widget(t *testing.T, name, zap string) *pbresource.Resource {
	return &pbresource.Resource{Id: id(widgetType, name), Data: mustAny(t, &pbfoov1.Zip{Zap: zap})}
}

func bar(t *testing.T, name string, owner *pbresource.ID) *pbresource.Resource {
	return &pbresource.Resource{Id: id(foo.BarV1Type, name), Owner: owner, Data: mustAny(t, &pbfoov1.Bar{Baz: name})}
}

func requireCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, status.Code(err), "%v", err)
}

func zapOf(t *testing.T, res *pbresource.Resource) string {
	var z pbfoov1.Zip
	require.NoError(t, res.Data.UnmarshalTo(&z))
	return z.Zap
}

// Reading history and trash needs read access; restoring needs write: a
// read-only token lists both but cannot restore. Who made each change is
// the token's name.
func TestACLs(t *testing.T) {
	e := newEnv(t)
	v1 := e.write(t, admin(t), widget(t, "w", "one"))
	v2 := e.write(t, admin(t), widget(t, "w", "two"))
	_, err := e.svc.Client.Delete(admin(t), &pbresource.DeleteRequest{Id: v2.Id})
	require.NoError(t, err)

	revs, err := e.history.ListRevisions(reader(t), &pbhistoryv1.ListRevisionsRequest{Id: id(widgetType, "w")})
	require.NoError(t, err)
	require.Len(t, revs.Revisions, 3)
	require.True(t, revs.Revisions[0].Deleted)
	require.Equal(t, v2.Version, revs.Revisions[1].Version)
	require.Equal(t, v1.Version, revs.Revisions[2].Version)
	for _, r := range revs.Revisions {
		require.Equal(t, "admin", r.By)
		require.Nil(t, r.CascadeFrom)
	}
	trash, err := e.history.ListTrash(reader(t), &pbhistoryv1.ListTrashRequest{Type: widgetType, Tenancy: id(widgetType, "").Tenancy})
	require.NoError(t, err)
	require.Len(t, trash.Revisions, 1)
	require.Equal(t, v2.Id.Uid, trash.Revisions[0].Resource.Id.Uid)

	one, err := e.history.ReadRevision(reader(t), &pbhistoryv1.ReadRevisionRequest{Id: id(widgetType, "w"), Version: v1.Version})
	require.NoError(t, err)
	require.Equal(t, "one", zapOf(t, one.Revision.Resource))

	_, err = e.history.Restore(reader(t), &pbhistoryv1.RestoreRequest{Id: id(widgetType, "w")})
	requireCode(t, err, codes.PermissionDenied)
	e.client.RequireResourceNotFound(t, id(widgetType, "w"))

	// Without read access to the type, nothing is told.
	_, err = e.history.ListRevisions(as(t, "foo-secret"), &pbhistoryv1.ListRevisionsRequest{Id: id(widgetType, "w")})
	requireCode(t, err, codes.PermissionDenied)
	_, err = e.history.ReadRevision(as(t, "foo-secret"), &pbhistoryv1.ReadRevisionRequest{Id: id(widgetType, "w"), Version: v1.Version})
	requireCode(t, err, codes.PermissionDenied)
	_, err = e.history.ListTrash(as(t, "foo-secret"), &pbhistoryv1.ListTrashRequest{Type: widgetType, Tenancy: id(widgetType, "").Tenancy})
	requireCode(t, err, codes.PermissionDenied)

	_, err = e.history.ListRevisions(as(t, "nobody"), &pbhistoryv1.ListRevisionsRequest{Id: id(widgetType, "w")})
	requireCode(t, err, codes.Unauthenticated)
}

// A restore from the trash is a new lifetime with a new Uid, and is refused
// when the name is taken.
func TestRestoreDeleted(t *testing.T) {
	e := newEnv(t)
	first := e.write(t, admin(t), widget(t, "w", "one"))
	_, err := e.svc.Client.Delete(admin(t), &pbresource.DeleteRequest{Id: first.Id})
	require.NoError(t, err)

	rsp, err := e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: id(widgetType, "w")})
	require.NoError(t, err)
	require.NotEqual(t, first.Id.Uid, rsp.Resource.Id.Uid)
	require.Equal(t, "one", zapOf(t, rsp.Resource))
	got := e.client.RequireResourceExists(t, id(widgetType, "w"))
	require.Equal(t, rsp.Resource.Id.Uid, got.Id.Uid)

	// The name is taken now (by the restored lifetime).
	_, err = e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: id(widgetType, "w")})
	requireCode(t, err, codes.AlreadyExists)

	// Naming the lifetime by its Uid, too.
	_, err = e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: first.Id})
	requireCode(t, err, codes.AlreadyExists)
	require.Equal(t, got.Version, e.client.RequireResourceExists(t, id(widgetType, "w")).Version, "nothing was written")
}

// A roll-back is a compare-and-swap: it fails with Aborted when the
// resource changed since the version it expects.
func TestRollBackIsCAS(t *testing.T) {
	e := newEnv(t)
	v1 := e.write(t, admin(t), widget(t, "w", "one"))
	v2 := e.write(t, admin(t), widget(t, "w", "two"))
	v3 := e.write(t, admin(t), widget(t, "w", "three"))

	_, err := e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: id(widgetType, "w"), Version: v1.Version, ExpectedVersion: v2.Version})
	requireCode(t, err, codes.Aborted)
	require.Equal(t, v3.Version, e.client.RequireResourceExists(t, v1.Id).Version)

	rsp, err := e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: id(widgetType, "w"), Version: v1.Version, ExpectedVersion: v3.Version})
	require.NoError(t, err)
	require.Equal(t, "one", zapOf(t, rsp.Resource))
	require.Equal(t, v1.Id.Uid, rsp.Resource.Id.Uid, "same lifetime")
	require.NotEqual(t, v3.Version, rsp.Resource.Version)

	// Without expected_version, the version read first is expected: a
	// write that lands between that read and the roll-back's write (here,
	// from the Mutate hook the roll-back runs) makes it fail.
	before := e.client.RequireResourceExists(t, v1.Id)
	var racer *pbresource.Resource
	racing := func() {
		out, err := e.svc.Server.Write(context.Background(), &pbresource.WriteRequest{Resource: widget(t, "w", "racer")})
		require.NoError(t, err)
		racer = out.Resource
	}
	e.onMutate.Store(&racing)
	_, err = e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: id(widgetType, "w"), Version: v2.Version})
	requireCode(t, err, codes.Aborted)
	require.NotNil(t, racer)
	require.NotEqual(t, before.Version, racer.Version)
	final := e.client.RequireResourceExists(t, v1.Id)
	require.Equal(t, racer.Version, final.Version)
	require.Equal(t, "racer", zapOf(t, final))
}

// Mutate and Validate run on a restore as on any Write.
func TestRestoreRunsHooks(t *testing.T) {
	e := newEnv(t)
	v1 := e.write(t, admin(t), widget(t, "w", "one"))
	e.write(t, admin(t), widget(t, "w", "two"))

	blocked := "one"
	e.blocked.Store(&blocked)
	before := e.mutates.Load()
	_, err := e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: id(widgetType, "w"), Version: v1.Version})
	requireCode(t, err, codes.InvalidArgument)
	require.Contains(t, status.Convert(err).Message(), "zap")
	require.Greater(t, e.mutates.Load(), before, "Mutate ran")
	require.Equal(t, "two", zapOf(t, e.client.RequireResourceExists(t, v1.Id)))

	e.blocked.Store(new(string))
	_, err = e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: id(widgetType, "w"), Version: v1.Version})
	require.NoError(t, err)
	require.Equal(t, "one", zapOf(t, e.client.RequireResourceExists(t, v1.Id)))
}

// Restoring an owner with_owned brings back what the reaper's cascade
// removed, recursively, each owned by its restored owner's new Uid.
func TestRestoreWithOwned(t *testing.T) {
	e := newEnv(t)
	owner := e.write(t, admin(t), bar(t, "owner", nil))
	child := e.write(t, admin(t), bar(t, "child", owner.Id))
	grandchild := e.write(t, admin(t), bar(t, "grandchild", child.Id))
	// Deleted by a client before the owner: not part of the cascade.
	early := e.write(t, admin(t), bar(t, "early", owner.Id))
	_, err := e.svc.Client.Delete(admin(t), &pbresource.DeleteRequest{Id: early.Id})
	require.NoError(t, err)

	_, err = e.svc.Client.Delete(admin(t), &pbresource.DeleteRequest{Id: owner.Id})
	require.NoError(t, err)
	e.client.WaitForDeletion(t, child.Id)
	e.client.WaitForDeletion(t, grandchild.Id)

	// The reaper's deletions are recorded as the owner's cascade.
	trash, err := e.history.ListTrash(reader(t), &pbhistoryv1.ListTrashRequest{Type: foo.BarV1Type, Tenancy: owner.Id.Tenancy, NamePrefix: "grand"})
	require.NoError(t, err)
	require.Len(t, trash.Revisions, 1)
	require.True(t, proto.Equal(child.Id, trash.Revisions[0].CascadeFrom), "cascade_from: %v", trash.Revisions[0].CascadeFrom)

	rsp, err := e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: id(foo.BarV1Type, "owner"), WithOwned: true})
	require.NoError(t, err)
	require.Empty(t, rsp.NotRestored)
	require.NotEqual(t, owner.Id.Uid, rsp.Resource.Id.Uid)
	require.Len(t, rsp.Owned, 2)
	require.Equal(t, "child", rsp.Owned[0].Id.Name)
	require.Equal(t, child.Id.Uid, rsp.Owned[0].PreviousUid)
	require.Equal(t, "grandchild", rsp.Owned[1].Id.Name)

	newOwner := e.client.RequireResourceExists(t, id(foo.BarV1Type, "owner"))
	newChild := e.client.RequireResourceExists(t, id(foo.BarV1Type, "child"))
	newGrandchild := e.client.RequireResourceExists(t, id(foo.BarV1Type, "grandchild"))
	e.client.RequireResourceNotFound(t, id(foo.BarV1Type, "early"))
	require.Equal(t, newOwner.Id.Uid, newChild.Owner.Uid)
	require.Equal(t, newChild.Id.Uid, newGrandchild.Owner.Uid)
	require.NotEqual(t, child.Id.Uid, newChild.Id.Uid)
	require.NotEqual(t, grandchild.Id.Uid, newGrandchild.Id.Uid)

}

// What could not be restored is said, with the reason, and what it owned
// is not restored either.
func TestRestoreWithOwnedReportsFailures(t *testing.T) {
	e := newEnv(t)
	owner := e.write(t, admin(t), bar(t, "owner", nil))
	child := e.write(t, admin(t), bar(t, "child", owner.Id))
	grandchild := e.write(t, admin(t), bar(t, "grandchild", child.Id))
	_, err := e.svc.Client.Delete(admin(t), &pbresource.DeleteRequest{Id: owner.Id})
	require.NoError(t, err)
	e.client.WaitForDeletion(t, grandchild.Id)
	// The child's name is taken meanwhile.
	e.write(t, admin(t), bar(t, "child", nil))

	rsp, err := e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: id(foo.BarV1Type, "owner"), WithOwned: true})
	require.NoError(t, err)
	require.Empty(t, rsp.Owned)
	require.Len(t, rsp.NotRestored, 2)
	require.Equal(t, "child", rsp.NotRestored[0].Id.Name)
	require.Equal(t, codes.AlreadyExists.String(), rsp.NotRestored[0].Code)
	require.Equal(t, "grandchild", rsp.NotRestored[1].Id.Name)
	require.Equal(t, codes.FailedPrecondition.String(), rsp.NotRestored[1].Code)
	e.client.RequireResourceNotFound(t, grandchild.Id)
}

// A backend that keeps no history makes the service Unimplemented.
func TestUnimplementedWithoutHistorian(t *testing.T) {
	e := newEnv(t)
	srv := server.New(server.Config{Backend: noHistory{e.svc.Backend}, Registry: e.svc.Registry})
	_, err := history.New(srv).ListRevisions(t.Context(), &pbhistoryv1.ListRevisionsRequest{Id: id(widgetType, "w")})
	requireCode(t, err, codes.Unimplemented)
}

// noHistory is a Backend that is not a storage.Historian.
type noHistory struct{ storage.Backend }

// ListRevisions pages newest first, each page continuing where the last
// ended; bad pages are InvalidArgument.
func TestListRevisionsPages(t *testing.T) {
	e := newEnv(t)
	var versions []string
	for _, zap := range []string{"a", "b", "c", "d", "e"} {
		versions = append([]string{e.write(t, admin(t), widget(t, "w", zap)).Version}, versions...)
	}
	var got []string
	req := &pbhistoryv1.ListRevisionsRequest{Id: id(widgetType, "w"), PageSize: 2}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5, "the listing ends")
		rsp, err := e.history.ListRevisions(reader(t), req)
		require.NoError(t, err)
		require.LessOrEqual(t, len(rsp.Revisions), 2)
		for _, r := range rsp.Revisions {
			got = append(got, r.Version)
		}
		if rsp.NextPageToken == "" {
			break
		}
		req.PageToken = rsp.NextPageToken
	}
	require.Equal(t, versions, got)

	_, err := e.history.ListRevisions(reader(t), &pbhistoryv1.ListRevisionsRequest{Id: id(widgetType, "w"), PageSize: history.MaxPageSize + 1})
	requireCode(t, err, codes.InvalidArgument)
	_, err = e.history.ListRevisions(reader(t), &pbhistoryv1.ListRevisionsRequest{Id: id(widgetType, "w"), PageToken: "not-a-version"})
	requireCode(t, err, codes.InvalidArgument)
	_, err = e.history.ReadRevision(reader(t), &pbhistoryv1.ReadRevisionRequest{Id: id(widgetType, "w"), Version: "x"})
	requireCode(t, err, codes.InvalidArgument)
	_, err = e.history.ReadRevision(reader(t), &pbhistoryv1.ReadRevisionRequest{Id: id(widgetType, "w"), Version: "1"})
	requireCode(t, err, codes.NotFound)
}

// ListTrash leaves out the deleted resources the caller may not read, as
// List does.
func TestListTrashFiltersByReadAccess(t *testing.T) {
	e := newEnv(t)
	for _, ns := range []string{"a", "b"} {
		w := widget(t, "w-"+ns, "x")
		w.Id.Tenancy.Namespace = ns
		stored := e.write(t, admin(t), w)
		_, err := e.svc.Client.Delete(admin(t), &pbresource.DeleteRequest{Id: stored.Id})
		require.NoError(t, err)
	}
	all := &pbresource.Tenancy{Partition: "*", Namespace: "*"}
	rsp, err := e.history.ListTrash(admin(t), &pbhistoryv1.ListTrashRequest{Type: widgetType, Tenancy: all})
	require.NoError(t, err)
	require.Len(t, rsp.Revisions, 2)

	rsp, err = e.history.ListTrash(as(t, "team-a-secret"), &pbhistoryv1.ListTrashRequest{Type: widgetType, Tenancy: all})
	require.NoError(t, err)
	require.Len(t, rsp.Revisions, 1)
	require.Equal(t, "w-a", rsp.Revisions[0].Resource.Id.Name)
	require.Empty(t, rsp.NextPageToken)

	_, err = e.history.ListTrash(as(t, "team-a-secret"), &pbhistoryv1.ListTrashRequest{Type: widgetType, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "b"}})
	requireCode(t, err, codes.PermissionDenied)
}

// with_owned goes with a deletion only: a roll-back, or a write's version,
// is InvalidArgument.
func TestWithOwnedNeedsADeletion(t *testing.T) {
	e := newEnv(t)
	v1 := e.write(t, admin(t), widget(t, "w", "one"))
	e.write(t, admin(t), widget(t, "w", "two"))
	_, err := e.history.Restore(admin(t), &pbhistoryv1.RestoreRequest{Id: id(widgetType, "w"), Version: v1.Version, WithOwned: true})
	requireCode(t, err, codes.InvalidArgument)
	require.Equal(t, "two", zapOf(t, e.client.RequireResourceExists(t, v1.Id)))
}
