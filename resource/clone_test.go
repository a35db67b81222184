package resource_test

import (
	"testing"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fill sets every field of m (recursively) to a non-zero value, so a field
// the hand-written copies forget shows up as a difference.
func fill(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			key := protoreflect.ValueOfString("k").MapKey()
			if fd.MapValue().Kind() == protoreflect.MessageKind {
				v := mp.NewValue()
				fill(v.Message(), depth+1)
				mp.Set(key, v)
			} else {
				mp.Set(key, protoreflect.ValueOfString("v"))
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			if fd.Kind() == protoreflect.MessageKind {
				v := l.NewElement()
				fill(v.Message(), depth+1)
				l.Append(v)
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth < 4 {
				fill(m.Mutable(fd).Message(), depth+1)
			}
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString(string(fd.Name())))
		case fd.Kind() == protoreflect.BytesKind:
			m.Set(fd, protoreflect.ValueOfBytes([]byte(fd.Name())))
		case fd.Kind() == protoreflect.EnumKind:
			m.Set(fd, protoreflect.ValueOfEnum(1))
		case fd.Kind() == protoreflect.Int64Kind:
			m.Set(fd, protoreflect.ValueOfInt64(42))
		case fd.Kind() == protoreflect.Int32Kind:
			m.Set(fd, protoreflect.ValueOfInt32(7))
		}
	}
}

func TestCloneCopiesEveryField(t *testing.T) {
	res := &pbresource.Resource{}
	fill(res.ProtoReflect(), 0)
	got := resource.Clone(res)
	require.True(t, proto.Equal(res, got), "Clone lost a field:\nwant %v\ngot  %v", res, got)

	// The copy shares nothing mutable with the original.
	got.Id.Type.Kind = "X"
	got.Metadata["k"] = "changed"
	got.Status["k"].Conditions[0].Resource.Tenancy.Namespace = "changed"
	got.Data.Value[0] = 'Z'
	require.NotEqual(t, "X", res.Id.Type.Kind)
	require.Equal(t, "v", res.Metadata["k"])
	require.NotEqual(t, "changed", res.Status["k"].Conditions[0].Resource.Tenancy.Namespace)
	require.NotEqual(t, byte('Z'), res.Data.Value[0])
	require.Nil(t, resource.Clone(nil))
}

// TestCloneIDsAnyReferenceCopyEveryField checks the other copies built on
// the shared layout (internal/pblayout) the same way.
func TestCloneIDsAnyReferenceCopyEveryField(t *testing.T) {
	id := &pbresource.ID{}
	fill(id.ProtoReflect(), 0)
	gotID := resource.CloneID(id)
	require.True(t, proto.Equal(id, gotID), "CloneID lost a field: %v", gotID)
	require.NotSame(t, id.Type, gotID.Type)
	require.NotSame(t, id.Tenancy, gotID.Tenancy)

	ids := resource.CloneIDs([]*pbresource.ID{id, nil, {Name: "bare"}})
	require.True(t, proto.Equal(id, ids[0]), "CloneIDs lost a field: %v", ids[0])
	require.Nil(t, ids[1])
	require.Nil(t, ids[2].Type)
	require.Equal(t, "bare", ids[2].Name)

	a := &anypb.Any{}
	fill(a.ProtoReflect(), 0)
	gotAny := resource.CloneAny(a)
	require.True(t, proto.Equal(a, gotAny), "CloneAny lost a field: %v", gotAny)
	gotAny.Value[0] = 'Z'
	require.NotEqual(t, byte('Z'), a.Value[0])

	ref := &pbresource.Reference{}
	fill(ref.ProtoReflect(), 0)
	gotRef := resource.CloneReference(ref)
	require.True(t, proto.Equal(ref, gotRef), "CloneReference lost a field: %v", gotRef)
	require.NotSame(t, ref.Type, gotRef.Type)
	require.NotSame(t, ref.Tenancy, gotRef.Tenancy)
}

// TestCloneStatusShapes checks the copies of statuses of every size: none,
// one (copied in one allocation, several of them in one array) and more
// conditions, nil ones included.
func TestCloneStatusShapes(t *testing.T) {
	cond := func(typ string) *pbresource.Condition {
		c := &pbresource.Condition{}
		fill(c.ProtoReflect(), 0)
		c.Type = typ
		return c
	}
	filled := func(conds ...*pbresource.Condition) *pbresource.Status {
		st := &pbresource.Status{}
		fill(st.ProtoReflect(), 0)
		st.Conditions = conds
		return st
	}
	statuses := map[string]*pbresource.Status{
		"none":      filled(),
		"empty":     filled([]*pbresource.Condition{}...),
		"one":       filled(cond("a")),
		"one more":  filled(cond("b")),
		"nil one":   filled(nil),
		"two":       filled(cond("c"), cond("d")),
		"two, nil":  filled(cond("e"), nil),
		"bare":      {},
		"nil":       nil,
		"third one": filled(cond("f")),
	}
	at := time.Unix(1700000000, 123456789)
	for k, st := range statuses {
		got := resource.CloneStatus(st)
		require.True(t, proto.Equal(st, got), "CloneStatus(%s) = %v", k, got)

		// CloneStatusAt: the same, stamped, sharing nothing with st.
		stamped := resource.CloneStatusAt(st, at)
		if st == nil {
			require.Nil(t, stamped)
			continue
		}
		want := proto.Clone(st).(*pbresource.Status)
		want.UpdatedAt = timestamppb.New(at)
		require.True(t, proto.Equal(want, stamped), "CloneStatusAt(%s) = %v", k, stamped)
		require.NotSame(t, st.UpdatedAt, stamped.UpdatedAt)
		if len(st.Conditions) > 0 && st.Conditions[0] != nil {
			require.NotSame(t, st.Conditions[0], stamped.Conditions[0])
		}
	}
	res := &pbresource.Resource{Status: statuses}
	got := resource.Clone(res)
	require.True(t, proto.Equal(res, got), "Clone lost a status: %v", got.Status)

	// The copies share nothing with the original nor with each other.
	got.Status["one"].Conditions[0].Type = "changed"
	got.Status["one"].Conditions = append(got.Status["one"].Conditions, cond("appended"))
	got.Status["one more"].UpdatedAt.Seconds = -1
	require.Equal(t, "a", statuses["one"].Conditions[0].Type)
	require.Equal(t, "b", got.Status["one more"].Conditions[0].Type)
	require.Equal(t, "f", got.Status["third one"].Conditions[0].Type)
	require.NotEqual(t, int64(-1), statuses["one more"].UpdatedAt.Seconds)
	require.Len(t, statuses["one"].Conditions, 1)
}

// BenchmarkClone copies a resource shaped like what controllers store: an
// ID, an owner, data, two metadata entries and one status.
func BenchmarkClone(b *testing.B) {
	ten := &pbresource.Tenancy{Partition: "default", Namespace: "default"}
	typ := &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"}
	res := &pbresource.Resource{
		Id:         &pbresource.ID{Type: typ, Tenancy: ten, Name: "widget-1", Uid: resource.NewULID()},
		Owner:      &pbresource.ID{Type: typ, Tenancy: ten, Name: "owner-1", Uid: resource.NewULID()},
		Version:    "12345",
		Generation: resource.NewULID(),
		Metadata:   map[string]string{"a": "1", "b": "2"},
		Status: map[string]*pbresource.Status{"ctl": {
			ObservedGeneration: "g",
			Conditions:         []*pbresource.Condition{{Type: "Ready", State: pbresource.Condition_STATE_TRUE}},
		}},
		Data: &anypb.Any{TypeUrl: "type.googleapis.com/bench.Widget", Value: []byte("0123456789abcdef")},
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = resource.Clone(res)
	}
}

func TestCloneSharingSharesOnlyWhatPrevHolds(t *testing.T) {
	filled := func() *pbresource.Resource {
		res := &pbresource.Resource{}
		fill(res.ProtoReflect(), 0)
		return res
	}
	prev := filled()
	prev.Status["other"] = resource.CloneStatus(prev.Status["k"])
	require.Len(t, prev.Status, 2)

	// A status write built on prev: its parts, one status replaced.
	res := &pbresource.Resource{
		Id: prev.Id, Owner: prev.Owner, Version: prev.Version, Generation: prev.Generation,
		Metadata: prev.Metadata, Data: prev.Data, Status: map[string]*pbresource.Status{},
	}
	var kept, replaced string
	for k, v := range prev.Status {
		if kept == "" {
			kept, res.Status[k] = k, v
			continue
		}
		replaced = k
		res.Status[k] = resource.CloneStatus(v)
		res.Status[k].ObservedGeneration = "changed"
	}
	require.NotEmpty(t, replaced)

	out := resource.CloneSharing(res, prev)
	require.True(t, proto.Equal(res, out))
	require.Same(t, prev.Id, out.Id)
	require.Same(t, prev.Owner, out.Owner)
	require.Same(t, prev.Data, out.Data)
	require.Same(t, prev.Status[kept], out.Status[kept])
	require.NotSame(t, res.Status[replaced], out.Status[replaced])

	// What was not prev's is copied: changing res now leaves out alone.
	snapshot := proto.Clone(out)
	res.Status[replaced].ObservedGeneration = "scribbled"
	res.Version = "scribbled"
	require.True(t, proto.Equal(snapshot, out))

	// Nothing shared with an unrelated prev, or without one.
	fresh := filled()
	noPrev := resource.CloneSharing(fresh, nil)
	require.True(t, proto.Equal(fresh, noPrev))
	require.NotSame(t, fresh.Id, noPrev.Id)
	c := resource.CloneSharing(fresh, prev)
	require.True(t, proto.Equal(fresh, c))
	require.NotSame(t, fresh.Id, c.Id)
	require.NotSame(t, fresh.Data, c.Data)
	fresh.Metadata["x"] = "scribbled"
	require.NotContains(t, c.Metadata, "x")
}

func TestCloneSharingIDTakesTypeAndTenancyOfLike(t *testing.T) {
	filled := func() *pbresource.Resource {
		res := &pbresource.Resource{}
		fill(res.ProtoReflect(), 0)
		return res
	}
	like := resource.CloneID(filled().Id)
	for name, prev := range map[string]*pbresource.Resource{"no prev": nil, "unrelated prev": filled()} {
		res := filled()
		out := resource.CloneSharingID(res, prev, like)
		require.True(t, proto.Equal(res, out), name)
		require.Same(t, like.Type, out.Id.Type, name)
		require.Same(t, like.Tenancy, out.Id.Tenancy, name)
		require.NotSame(t, res.Id, out.Id, name)
		require.NotSame(t, res.Data, out.Data, name)
		res.Id.Name, res.Data.Value[0] = "scribbled", 'Z'
		require.NotEqual(t, "scribbled", out.Id.Name, name)
		require.NotEqual(t, byte('Z'), out.Data.Value[0], name)

		// A like of another type or tenancy is not shared.
		other := resource.CloneID(like)
		other.Type.GroupVersion, other.Tenancy.Namespace = "v9", "elsewhere"
		out = resource.CloneSharingID(filled(), prev, other)
		require.True(t, proto.Equal(filled(), out), name)
		require.NotSame(t, other.Type, out.Id.Type, name)
		require.NotSame(t, other.Tenancy, out.Id.Tenancy, name)
	}
	require.Nil(t, resource.CloneSharingID(nil, nil, like))
}
