package server

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// TestServerNeverChangesRequests calls the service's methods directly (as
// gRPC and the in-process client do, which pass requests without copying
// them) with requests the server has reasons to change: tenancy left to
// defaults, type URLs in a non-canonical form, Mutate hooks that change
// data, ID and metadata, owners without Uid. Every request must be exactly
// as it was afterwards, and whatever the server stored must not share a
// message the caller can still change.
func TestServerNeverChangesRequests(t *testing.T) {
	env := newEnv(t)
	registerHookType(env)
	ctx := context.Background()
	s := env.server

	// check runs call and requires that req is unchanged by it.
	check := func(name string, req proto.Message, call func() error) {
		t.Helper()
		before := proto.Clone(req)
		require.NoError(t, call(), name)
		require.True(t, proto.Equal(before, req), "%s changed its request:\nbefore %v\nafter  %v", name, before, req)
	}

	owner := env.write(t, zip(t, "owner"))
	noDefaults := func(id *pbresource.ID) *pbresource.ID { id.Tenancy = nil; return id }
	bareURL := func(m proto.Message) *anypb.Any {
		a := mustAny(t, m)
		a.TypeUrl = string(m.ProtoReflect().Descriptor().FullName())
		return a
	}

	create := &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id:       noDefaults(barID("b")),
		Owner:    &pbresource.ID{Type: owner.Id.Type, Name: "owner"}, // no Uid, no tenancy
		Data:     bareURL(&pbfoov1.Bar{Baz: "MiXeD"}),                // lowered by Mutate
		Metadata: map[string]string{"k": "v"},
	}}
	var created *pbresource.Resource
	check("Write (create)", create, func() error {
		out, err := s.Write(ctx, create)
		created = out.GetResource()
		return err
	})
	require.Equal(t, "mixed", decodeBar(t, created).Baz)
	require.NotEmpty(t, created.Owner.GetUid())

	update := &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id:       noDefaults(barID("b")),
		Owner:    &pbresource.ID{Type: owner.Id.Type, Name: "owner"},
		Data:     bareURL(&pbfoov1.Bar{Baz: "Changed"}),
		Metadata: map[string]string{"k": "v2"},
	}}
	check("Write (update)", update, func() error { _, err := s.Write(ctx, update); return err })

	for _, note := range []string{"mutate-replace", "mutate-label", "plain"} {
		req := &pbresource.WriteRequest{Resource: &pbresource.Resource{
			Id:   &pbresource.ID{Type: hookType, Name: "h-" + note[len(note)-5:]},
			Data: mustAny(t, &pbfoov1.Qux{Note: note}),
		}}
		check("Write "+note, req, func() error { _, err := s.Write(ctx, req); return err })
		mv := &pbresource.MutateAndValidateRequest{Resource: req.Resource}
		check("MutateAndValidate "+note, mv, func() error { _, err := s.MutateAndValidate(ctx, mv); return err })
	}
	replaced := env.mustRead(t, &pbresource.ID{Type: hookType, Name: "h-place"})
	var q pbfoov1.Qux
	require.NoError(t, replaced.Data.UnmarshalTo(&q))
	require.Equal(t, "replaced", q.Note)
	require.Equal(t, "yes", env.mustRead(t, &pbresource.ID{Type: hookType, Name: "h-label"}).Metadata["mutated"])

	ws := &pbresource.WriteStatusRequest{
		Id:     noDefaults(withUid(barID("b"), created.Id.Uid)),
		Key:    "ctrl",
		Status: &pbresource.Status{ObservedGeneration: created.Generation, Conditions: []*pbresource.Condition{{Type: "Ready"}}},
	}
	check("WriteStatus", ws, func() error { _, err := s.WriteStatus(ctx, ws); return err })

	read := &pbresource.ReadRequest{Id: noDefaults(barID("b"))}
	check("Read", read, func() error { _, err := s.Read(ctx, read); return err })
	list := &pbresource.ListRequest{Type: barID("b").Type}
	check("List", list, func() error { _, err := s.List(ctx, list); return err })
	lbo := &pbresource.ListByOwnerRequest{Owner: noDefaults(zipID("owner"))}
	lbo.Owner.Uid = owner.Id.Uid
	check("ListByOwner", lbo, func() error { _, err := s.ListByOwner(ctx, lbo); return err })
	watch := &pbresource.WatchListRequest{Type: barID("b").Type} // tenancy left to defaults
	check("WatchList", watch, func() error {
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stream, err := env.client.WatchList(wctx, watch)
		if err != nil {
			return err
		}
		for {
			ev, err := stream.Recv()
			if err != nil || ev.GetEndOfSnapshot() != nil {
				return err
			}
		}
	})
	del := &pbresource.DeleteRequest{Id: noDefaults(barID("b"))}
	check("Delete", del, func() error { _, err := s.Delete(ctx, del); return err })

	// What was stored does not alias a request: scribbling on one now
	// changes nothing stored.
	req := &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id: zipID("scribble"), Data: mustAny(t, &pbfoov1.Zip{Zap: "z"}), Metadata: map[string]string{"k": "v"},
	}}
	_, err := s.Write(ctx, req)
	require.NoError(t, err)
	stored := proto.Clone(env.mustRead(t, zipID("scribble")))
	req.Resource.Metadata["k"] = "scribbled"
	req.Resource.Data.Value[len(req.Resource.Data.Value)-1] ^= 0xff
	req.Resource.Id.Name = "renamed"
	require.True(t, proto.Equal(stored, env.mustRead(t, zipID("scribble"))))
}

// TestRuntimeType registers a type known only at run time (a dynamicpb
// message built from a descriptor), the one case for the untyped form, and
// runs a Write through its hooks.
func TestRuntimeType(t *testing.T) {
	env := newEnv(t)
	mt := dynamicpb.NewMessageType((&pbfoov1.Qux{}).ProtoReflect().Descriptor())
	note := mt.Descriptor().Fields().ByName("note")
	typ := &pbresource.Type{Group: "dyn", GroupVersion: "v1", Kind: "Qux"}
	resource.MustRegister(env.registry, resource.Registration[proto.Message]{
		Type:    typ,
		Scope:   resource.ScopeCluster,
		Message: mt,
		Mutate: func(res *resource.Decoded[proto.Message]) error {
			m := res.Data.ProtoReflect()
			m.Set(note, protoreflect.ValueOfString(strings.ToUpper(m.Get(note).String())))
			return nil
		},
		Validate: func(res *resource.Decoded[proto.Message]) error {
			if res.Data.ProtoReflect().Get(note).String() == "" {
				return resource.ErrInvalidField{Name: "note", Wrapped: resource.ErrMissing}
			}
			return nil
		},
	})
	out := env.write(t, &pbresource.Resource{Id: &pbresource.ID{Type: typ, Name: "d"}, Data: mustAny(t, &pbfoov1.Qux{Note: "quiet"})})
	var q pbfoov1.Qux
	require.NoError(t, out.Data.UnmarshalTo(&q))
	require.Equal(t, "QUIET", q.Note)
	_, err := env.client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id: &pbresource.ID{Type: typ, Name: "e"}, Data: mustAny(t, &pbfoov1.Qux{}),
	}})
	requireCode(t, err, codes.InvalidArgument, field("note"))
}
