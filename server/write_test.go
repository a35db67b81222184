package server

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

func decodeBar(t *testing.T, res *pbresource.Resource) *pbfoov1.Bar {
	t.Helper()
	var b pbfoov1.Bar
	require.NoError(t, res.Data.UnmarshalTo(&b))
	return &b
}

func TestWrite_Create(t *testing.T) {
	env := newEnv(t)
	res := bar(t, "a", "Hello")
	res.Id.Tenancy = nil // defaults filled in
	res.Generation = "ignored"
	res.Metadata = map[string]string{"k": "v", resource.FinalizerKey: "f1"}

	out := env.write(t, res)
	require.True(t, resource.IsULID(out.Id.Uid))
	require.True(t, resource.IsULID(out.Generation))
	require.NotEmpty(t, out.Version)
	require.Equal(t, "default", out.Id.Tenancy.Partition)
	require.Equal(t, "default", out.Id.Tenancy.Namespace)
	require.Equal(t, "hello", decodeBar(t, out).Baz, "Mutate hook ran")
	require.Equal(t, "v", out.Metadata["k"])
	require.Equal(t, []string{"f1"}, resource.Finalizers(out), "finalizers may be set on create")

	got := env.mustRead(t, barID("a"))
	require.True(t, proto.Equal(out, got))

	// Other scopes get their own defaults.
	z := zip(t, "z")
	z.Id.Tenancy = nil
	require.Equal(t, &pbresource.Tenancy{Partition: "default"}, env.write(t, z).Id.Tenancy)
	q := qux(t, "q")
	q.Id.Tenancy = nil
	require.Empty(t, env.write(t, q).Id.Tenancy.GetPartition())
}

func TestWrite_UpdateKeepsUidChangesGeneration(t *testing.T) {
	env := newEnv(t)
	v1 := env.write(t, bar(t, "a", "one"))
	v2 := env.write(t, bar(t, "a", "two"))
	require.Equal(t, v1.Id.Uid, v2.Id.Uid)
	require.NotEqual(t, v1.Version, v2.Version)
	require.NotEqual(t, v1.Generation, v2.Generation)
	require.Greater(t, v2.Generation, v1.Generation, "generations are ordered ULIDs")

	// Metadata changes are content changes too.
	withMeta := bar(t, "a", "two")
	withMeta.Metadata = map[string]string{"k": "v"}
	v3 := env.write(t, withMeta)
	require.NotEqual(t, v2.Generation, v3.Generation)

	// A status write changes the version but not the generation.
	v4 := env.writeStatus(t, v3.Id, "k", simpleStatus(v3.Generation))
	require.NotEqual(t, v3.Version, v4.Version)
	require.Equal(t, v3.Generation, v4.Generation)
}

// reversedBarBytes encodes a Bar with its fields in reverse order: the same
// message, different bytes.
func reversedBarBytes(t *testing.T, b *pbfoov1.Bar) []byte {
	qux, err := proto.Marshal(b.Qux)
	require.NoError(t, err)
	var out []byte
	out = protowire.AppendTag(out, 2, protowire.BytesType)
	out = protowire.AppendBytes(out, qux)
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	out = protowire.AppendString(out, b.Baz)
	return out
}

func TestWrite_NoOp(t *testing.T) {
	env := newEnv(t)
	owner := env.write(t, bar(t, "owner", "o"))

	data := &pbfoov1.Bar{Baz: "x", Qux: barID("z")}
	res := &pbresource.Resource{Id: barID("a"), Data: mustAny(t, data), Metadata: map[string]string{"k": "v"}, Owner: barID("owner")}
	first := env.write(t, res)
	require.Equal(t, owner.Id.Uid, first.Owner.Uid, "owner stored with its uid")

	stream := startWatch(t, env.client, &pbresource.WatchListRequest{Type: barID("a").Type})
	requireSnapshot(t, stream, 2)

	cases := map[string]func() *pbresource.Resource{
		"identical": func() *pbresource.Resource { return proto.Clone(res).(*pbresource.Resource) },
		"as read back": func() *pbresource.Resource {
			r := env.mustRead(t, barID("a"))
			r.Version = ""
			return r
		},
		"with version and uid": func() *pbresource.Resource {
			r := proto.Clone(res).(*pbresource.Resource)
			r.Version, r.Id.Uid = first.Version, first.Id.Uid
			return r
		},
		"same message, other bytes": func() *pbresource.Resource {
			r := proto.Clone(res).(*pbresource.Resource)
			r.Data = &anypb.Any{TypeUrl: r.Data.TypeUrl, Value: reversedBarBytes(t, data)}
			require.NotEqual(t, res.Data.Value, r.Data.Value)
			return r
		},
		"equal after Mutate": func() *pbresource.Resource {
			r := proto.Clone(res).(*pbresource.Resource)
			r.Data = mustAny(t, &pbfoov1.Bar{Baz: "X", Qux: barID("z")})
			return r
		},
		"owner with uid": func() *pbresource.Resource {
			r := proto.Clone(res).(*pbresource.Resource)
			r.Owner.Uid = owner.Id.Uid
			return r
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			out := env.write(t, mk())
			require.Equal(t, first.Version, out.Version)
			require.Equal(t, first.Generation, out.Generation)
		})
	}

	// No event was emitted: the next one is the real change below.
	env.write(t, bar(t, "a2", "changed"))
	ev := recvEvent(t, stream)
	require.Equal(t, "a2", ev.GetUpsert().GetResource().GetId().GetName())
}

func TestWrite_CAS(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)

	// A versioned write of a resource that does not exist.
	res := bar(t, "a", "x")
	res.Version = "12"
	_, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: res})
	requireCode(t, err, codes.Aborted)

	v1 := env.write(t, bar(t, "a", "x"))

	stale := bar(t, "a", "y")
	stale.Version = v1.Version + "0"
	_, err = env.client.Write(ctx, &pbresource.WriteRequest{Resource: stale})
	requireCode(t, err, codes.Aborted, "version")

	ok := bar(t, "a", "y")
	ok.Version = v1.Version
	v2 := env.write(t, ok)
	require.NotEqual(t, v1.Version, v2.Version)

	// v1's version is now stale.
	again := bar(t, "a", "z")
	again.Version = v1.Version
	_, err = env.client.Write(ctx, &pbresource.WriteRequest{Resource: again})
	requireCode(t, err, codes.Aborted)
	require.Equal(t, "y", decodeBar(t, env.mustRead(t, barID("a"))).Baz)
}

func TestWrite_Uid(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)

	// A Uid addresses one lifetime; when nothing is stored, there is none.
	res := bar(t, "a", "x")
	res.Id.Uid = resource.NewULID()
	_, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: res})
	requireCode(t, err, codes.NotFound, "uid")

	v1 := env.write(t, bar(t, "a", "x"))

	wrong := bar(t, "a", "y")
	wrong.Id.Uid = resource.NewULID()
	_, err = env.client.Write(ctx, &pbresource.WriteRequest{Resource: wrong})
	requireCode(t, err, codes.FailedPrecondition, "uid")

	right := bar(t, "a", "y")
	right.Id.Uid = v1.Id.Uid
	require.Equal(t, v1.Id.Uid, env.write(t, right).Id.Uid)

	// After a delete and re-create, the old Uid no longer matches.
	require.NoError(t, env.delete(t, barID("a"), ""))
	v3 := env.write(t, bar(t, "a", "x"))
	require.NotEqual(t, v1.Id.Uid, v3.Id.Uid)
	_, err = env.client.Write(ctx, &pbresource.WriteRequest{Resource: right})
	requireCode(t, err, codes.FailedPrecondition)
}

func TestWrite_Status(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)
	v1 := env.write(t, bar(t, "a", "x"))
	v2 := env.writeStatus(t, v1.Id, "ctl", simpleStatus(v1.Generation))
	require.NotNil(t, v2.Status["ctl"].UpdatedAt)

	// Omitted status is carried over.
	v3 := env.write(t, bar(t, "a", "y"))
	require.True(t, resource.EqualStatusMap(v2.Status, v3.Status))
	require.True(t, proto.Equal(v2.Status["ctl"], v3.Status["ctl"]), "carried over unchanged, UpdatedAt included")

	// Unchanged status (UpdatedAt aside) is accepted: read-modify-write.
	rmw := env.mustRead(t, barID("a"))
	rmw.Version = ""
	rmw.Status["ctl"].UpdatedAt = nil
	rmw.Data = mustAny(t, &pbfoov1.Bar{Baz: "z"})
	v4 := env.write(t, rmw)
	require.Equal(t, "z", decodeBar(t, v4).Baz)
	require.True(t, proto.Equal(v2.Status["ctl"], v4.Status["ctl"]))

	// Changed status is refused.
	changed := env.mustRead(t, barID("a"))
	changed.Status["ctl"].ObservedGeneration = resource.NewULID()
	_, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: changed})
	requireCode(t, err, codes.InvalidArgument, field("status"))

	added := env.mustRead(t, barID("a"))
	added.Status["other"] = simpleStatus(added.Generation)
	_, err = env.client.Write(ctx, &pbresource.WriteRequest{Resource: added})
	requireCode(t, err, codes.InvalidArgument, field("status"))
}

func TestWrite_Owner(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)
	owner := env.write(t, zip(t, "owner"))

	// Owner given without Uid: resolved and stored with it.
	child := bar(t, "child", "x")
	child.Owner = zipID("owner")
	child.Owner.Tenancy = nil // defaults apply to owners too
	stored := env.write(t, child)
	require.Equal(t, owner.Id.Uid, stored.Owner.Uid)
	require.Equal(t, "default", stored.Owner.Tenancy.Partition)

	// Owner given with the right Uid.
	child2 := bar(t, "child2", "x")
	child2.Owner = proto.Clone(owner.Id).(*pbresource.ID)
	require.Equal(t, owner.Id.Uid, env.write(t, child2).Owner.Uid)

	// Owner given with a Uid it does not have.
	child3 := bar(t, "child3", "x")
	child3.Owner = zipID("owner")
	child3.Owner.Uid = resource.NewULID()
	_, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: child3})
	requireCode(t, err, codes.InvalidArgument, field("owner"))

	// Updates: the owner is immutable.
	other := env.write(t, zip(t, "other"))
	for name, o := range map[string]*pbresource.ID{
		"removed":      nil,
		"changed":      zipID("other"),
		"changed uid":  func() *pbresource.ID { id := zipID("owner"); id.Uid = other.Id.Uid; return id }(),
		"changed type": barID("owner"),
	} {
		t.Run(name, func(t *testing.T) {
			upd := bar(t, "child", "y")
			upd.Owner = o
			_, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: upd})
			requireCode(t, err, codes.InvalidArgument, field("owner"))
		})
	}
	// Cannot be added after creation either.
	plain := env.write(t, bar(t, "plain", "x"))
	upd := bar(t, "plain", "y")
	upd.Owner = zipID("owner")
	_, err = env.client.Write(ctx, &pbresource.WriteRequest{Resource: upd})
	requireCode(t, err, codes.InvalidArgument, field("owner"))
	require.Equal(t, plain.Version, env.mustRead(t, barID("plain")).Version)

	// Unchanged owner, with or without its Uid, is fine.
	same := bar(t, "child", "y")
	same.Owner = zipID("owner")
	require.Equal(t, "y", decodeBar(t, env.write(t, same)).Baz)

	res, err := env.client.ListByOwner(ctx, &pbresource.ListByOwnerRequest{Owner: owner.Id})
	require.NoError(t, err)
	require.Len(t, res.Resources, 2)
}

func TestWrite_GroupVersions(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)
	v1 := env.write(t, bar(t, "a", "x"))

	// Writing the v2 form replaces the stored v1 form (same Uid).
	v2 := env.write(t, barV2(t, "a", "y"))
	require.Equal(t, v1.Id.Uid, v2.Id.Uid)
	require.Equal(t, "v2", v2.Id.Type.GroupVersion)

	_, err := env.client.Read(ctx, &pbresource.ReadRequest{Id: barID("a")})
	requireCode(t, err, codes.InvalidArgument, "GroupVersion")
	got := env.mustRead(t, barV2ID("a"))
	var b pbfoov2.Bar
	require.NoError(t, got.Data.UnmarshalTo(&b))
	require.Equal(t, "y", b.Baz)

	// List only returns the requested GroupVersion.
	env.write(t, bar(t, "b", "x"))
	l1, err := env.client.List(ctx, &pbresource.ListRequest{Type: barID("a").Type})
	require.NoError(t, err)
	require.Len(t, l1.Resources, 1)
	require.Equal(t, "b", l1.Resources[0].Id.Name)
	l2, err := env.client.List(ctx, &pbresource.ListRequest{Type: barV2ID("a").Type})
	require.NoError(t, err)
	require.Len(t, l2.Resources, 1)
	require.Equal(t, "a", l2.Resources[0].Id.Name)

	// WriteStatus through the v1 type lands on the stored v2 form.
	id := barID("a")
	id.Uid = v1.Id.Uid
	st := env.writeStatus(t, id, "k", simpleStatus(v2.Generation))
	require.Equal(t, "v2", st.Id.Type.GroupVersion)
	require.Contains(t, env.mustRead(t, barV2ID("a")).Status, "k")

	// Deleting through the v1 type deletes the stored form.
	require.NoError(t, env.delete(t, barID("a"), ""))
	_, err = env.read(t, barV2ID("a"))
	requireCode(t, err, codes.NotFound)
}

func TestWrite_DeletionTimestampIsServerOwned(t *testing.T) {
	env := newEnv(t)
	env.write(t, bar(t, "a", "x"))
	res := bar(t, "a", "x")
	res.Metadata = map[string]string{resource.DeletionTimestampKey: "2024-01-01T00:00:00Z"}
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: res})
	requireCode(t, err, codes.InvalidArgument, field("metadata.deletionTimestamp"))
}

// TestWrite_ConcurrentBlanketWrites has data writers and status writers race
// on one resource with blanket writes: every write must land and none may
// undo another.
func TestWrite_ConcurrentBlanketWrites(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)
	first := env.write(t, bar(t, "a", "init"))

	const writers, writes = 4, 40
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers*writes)
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range writes {
				res := bar(t, "a", fmt.Sprintf("w%d-%d", w, i))
				out, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: res})
				if err != nil {
					errs <- err
					continue
				}
				if got := decodeBar(t, out.Resource).Baz; got != fmt.Sprintf("w%d-%d", w, i) {
					errs <- fmt.Errorf("write returned %q", got)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := range writes {
				st := simpleStatus(first.Generation)
				st.Conditions[0].Message = fmt.Sprint(i)
				_, err := env.client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: first.Id, Key: fmt.Sprintf("s%d", w), Status: st})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	final := env.mustRead(t, barID("a"))
	require.Len(t, final.Status, writers, "no status write was lost")
	for w := range writers {
		require.Equal(t, fmt.Sprint(writes-1), final.Status[fmt.Sprintf("s%d", w)].Conditions[0].Message)
	}
	require.Regexp(t, `^w\d-39$`, decodeBar(t, final).Baz, "the last data write of some writer wins")
	require.Equal(t, first.Id.Uid, final.Id.Uid)
}

// hookType is a cluster-scoped test type whose hooks misbehave on demand,
// driven by Qux.note.
var hookType = &pbresource.Type{Group: "hooks", GroupVersion: "v1", Kind: "Hooked"}

func registerHookType(env *testEnv) {
	resource.MustRegister(env.registry, resource.Registration[*pbfoov1.Qux]{
		Type:  hookType,
		Scope: resource.ScopeCluster,
		Mutate: func(res *resource.Decoded[*pbfoov1.Qux]) error {
			switch res.Data.Note {
			case "mutate-error":
				return resource.NewErrInvalidField("note", "mutate says no")
			case "mutate-status":
				return status.Error(codes.FailedPrecondition, "mutate precondition")
			case "mutate-id":
				res.Resource.Id.Name = "renamed"
			case "mutate-data-nil":
				res.Data = nil
			case "mutate-owner":
				res.Resource.Owner = &pbresource.ID{Name: "BAD"}
			case "mutate-replace":
				res.Data = &pbfoov1.Qux{Note: "replaced"}
			case "mutate-label":
				if res.Resource.Metadata == nil {
					res.Resource.Metadata = map[string]string{}
				}
				res.Resource.Metadata["mutated"] = "yes"
			}
			return nil
		},
		Validate: func(res *resource.Decoded[*pbfoov1.Qux]) error {
			switch res.Data.Note {
			case "validate-status":
				return status.Error(codes.OutOfRange, "validate out of range")
			case "validate-error":
				return resource.ErrInvalidField{Name: "note", Wrapped: fmt.Errorf("bad note")}
			}
			return nil
		},
	})
}

func TestWrite_HookErrors(t *testing.T) {
	env := newEnv(t)
	registerHookType(env)
	cases := map[string]struct {
		code     codes.Code
		contains string
	}{
		"mutate-error":    {codes.InvalidArgument, field("note")},
		"mutate-status":   {codes.FailedPrecondition, "mutate precondition"},
		"mutate-id":       {codes.Internal, "id"},
		"mutate-data-nil": {codes.Internal, "Data"},
		"mutate-owner":    {codes.InvalidArgument, field("owner.type")},
		"validate-status": {codes.OutOfRange, "validate out of range"},
		"validate-error":  {codes.InvalidArgument, field("note")},
	}
	for note, tc := range cases {
		t.Run(note, func(t *testing.T) {
			res := &pbresource.Resource{
				Id:   &pbresource.ID{Type: hookType, Name: "h"},
				Data: mustAny(t, &pbfoov1.Qux{Note: note}),
			}
			_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: res})
			requireCode(t, err, tc.code, tc.contains)
			_, err = env.client.MutateAndValidate(testCtx(t), &pbresource.MutateAndValidateRequest{Resource: res})
			requireCode(t, err, tc.code, tc.contains)
		})
	}
	_, err := env.read(t, &pbresource.ID{Type: hookType, Name: "h"})
	requireCode(t, err, codes.NotFound)
}

func TestMutateAndValidate(t *testing.T) {
	env := newEnv(t)
	res := bar(t, "a", "MiXeD")
	res.Id.Tenancy = nil
	out, err := env.client.MutateAndValidate(testCtx(t), &pbresource.MutateAndValidateRequest{Resource: res})
	require.NoError(t, err)
	require.Equal(t, "mixed", decodeBar(t, out.Resource).Baz)
	require.Equal(t, "default", out.Resource.Id.Tenancy.Namespace)
	require.Equal(t, "MiXeD", decodeBar(t, res).Baz, "the caller's message is untouched")
	requireEmpty(t, env)
}

func TestNew_TombstoneType(t *testing.T) {
	env := newEnv(t)
	reg, ok := env.registry.Resolve(resource.TypeV1Tombstone)
	require.True(t, ok)
	require.Equal(t, resource.ScopeNamespace, reg.Scope)
	// A second server on the same registry does not register it twice.
	require.NotPanics(t, func() { New(Config{Backend: env.backend, Registry: env.registry}) })
	// Defaults.
	s := New(Config{Backend: env.backend})
	_, ok = s.Registry().Resolve(resource.TypeV1Tombstone)
	require.True(t, ok)
	require.Panics(t, func() { New(Config{}) })
	_ = context.Background()
}

func decodeBarWith(baz string) *pbfoov1.Bar { return &pbfoov1.Bar{Baz: baz} }
