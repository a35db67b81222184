package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/anypb"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

func field(name string) string { return `"` + name + `"` }

// withFreshUid gives id a fresh Uid.
func withFreshUid(id *pbresource.ID) *pbresource.ID {
	id.Uid = resource.NewULID()
	return id
}

// finalizerNames returns n distinct finalizer names of length bytes each
// (at least 8), separated by spaces.
func finalizerNames(n, length int) string {
	names := make([]string, n)
	for i := range names {
		name := fmt.Sprintf("f%07d", i)
		names[i] = name + strings.Repeat("x", length-len(name))
	}
	return strings.Join(names, " ")
}

// writeCases are Writes that must be rejected with InvalidArgument naming a
// field, before anything is stored.
func writeCases(t *testing.T) map[string]struct {
	res   func() *pbresource.Resource
	field string
} {
	valid := func() *pbresource.Resource { return bar(t, "a", "x") }
	with := func(f func(r *pbresource.Resource)) func() *pbresource.Resource {
		return func() *pbresource.Resource { r := valid(); f(r); return r }
	}
	return map[string]struct {
		res   func() *pbresource.Resource
		field string
	}{
		"nil resource":       {func() *pbresource.Resource { return nil }, "resource"},
		"nil id":             {with(func(r *pbresource.Resource) { r.Id = nil }), "id"},
		"nil type":           {with(func(r *pbresource.Resource) { r.Id.Type = nil }), "id.type"},
		"bad group":          {with(func(r *pbresource.Resource) { r.Id.Type.Group = "Foo" }), "id.type.group"},
		"bad group version":  {with(func(r *pbresource.Resource) { r.Id.Type.GroupVersion = "1" }), "id.type.group_version"},
		"bad kind":           {with(func(r *pbresource.Resource) { r.Id.Type.Kind = "bar" }), "id.type.kind"},
		"unregistered type":  {with(func(r *pbresource.Resource) { r.Id.Type.GroupVersion = "v9" }), "id.type"},
		"empty name":         {with(func(r *pbresource.Resource) { r.Id.Name = "" }), "id.name"},
		"uppercase name":     {with(func(r *pbresource.Resource) { r.Id.Name = "Abc" }), "id.name"},
		"underscore name":    {with(func(r *pbresource.Resource) { r.Id.Name = "a_b" }), "id.name"},
		"leading dash":       {with(func(r *pbresource.Resource) { r.Id.Name = "-ab" }), "id.name"},
		"trailing dash":      {with(func(r *pbresource.Resource) { r.Id.Name = "ab-" }), "id.name"},
		"name too long":      {with(func(r *pbresource.Resource) { r.Id.Name = strings.Repeat("a", 64) }), "id.name"},
		"bad partition":      {with(func(r *pbresource.Resource) { r.Id.Tenancy.Partition = "Part" }), "id.tenancy.partition"},
		"bad namespace":      {with(func(r *pbresource.Resource) { r.Id.Tenancy.Namespace = "n s" }), "id.tenancy.namespace"},
		"wildcard namespace": {with(func(r *pbresource.Resource) { r.Id.Tenancy.Namespace = "*" }), "id.tenancy.namespace"},
		"bad uid":            {with(func(r *pbresource.Resource) { r.Id.Uid = "not-a-ulid" }), "id.uid"},
		"nil data":           {with(func(r *pbresource.Resource) { r.Data = nil }), "data"},
		"wrong data type":    {with(func(r *pbresource.Resource) { r.Data = mustAny(t, &pbfoov1.Zip{Zap: "x"}) }), "data"},
		"unknown data type":  {with(func(r *pbresource.Resource) { r.Data.TypeUrl = "type.googleapis.com/no.Such" }), "data"},
		"empty type url":     {with(func(r *pbresource.Resource) { r.Data.TypeUrl = "" }), "data"},
		"undecodable data":   {with(func(r *pbresource.Resource) { r.Data.Value = []byte{0xff, 0xff, 0xff} }), "data"},
		"validate hook":      {func() *pbresource.Resource { return bar(t, "a", "") }, "baz"},
		"status on create": {with(func(r *pbresource.Resource) {
			r.Status = map[string]*pbresource.Status{"k": simpleStatus(resource.NewULID())}
		}), "status"},
		"deletion timestamp": {with(func(r *pbresource.Resource) {
			r.Metadata = map[string]string{resource.DeletionTimestampKey: "2024-01-01T00:00:00Z"}
		}), "metadata.deletionTimestamp"},
		"owner without type": {with(func(r *pbresource.Resource) { r.Owner = &pbresource.ID{Name: "o"} }), "owner.type"},
		"owner unregistered": {with(func(r *pbresource.Resource) { r.Owner = barID("o"); r.Owner.Type.Kind = "Nope" }), "owner.type"},
		"owner bad name":     {with(func(r *pbresource.Resource) { r.Owner = barID("O") }), "owner.name"},
		"owner bad tenancy":  {with(func(r *pbresource.Resource) { r.Owner = zipID("o"); r.Owner.Tenancy.Namespace = "ns" }), "owner.tenancy.namespace"},
		"owner bad uid":      {with(func(r *pbresource.Resource) { r.Owner = barID("o"); r.Owner.Uid = "x" }), "owner.uid"},
		"owner missing":      {with(func(r *pbresource.Resource) { r.Owner = barID("o") }), "owner"},
		"zip with namespace": {func() *pbresource.Resource { r := zip(t, "z"); r.Id.Tenancy.Namespace = "default"; return r }, "id.tenancy.namespace"},
		"qux with partition": {func() *pbresource.Resource { r := qux(t, "q"); r.Id.Tenancy.Partition = "default"; return r }, "id.tenancy.partition"},
		"qux with namespace": {func() *pbresource.Resource { r := qux(t, "q"); r.Id.Tenancy.Namespace = "default"; return r }, "id.tenancy.namespace"},
		"zip with bad part":  {func() *pbresource.Resource { r := zip(t, "z"); r.Id.Tenancy.Partition = "*"; return r }, "id.tenancy.partition"},
		"tombstone bad data": {func() *pbresource.Resource { r := bar(t, "t", "x"); r.Id.Type = resource.TypeV1Tombstone; return r }, "id.type"},
		"forged tombstone": {func() *pbresource.Resource {
			return &pbresource.Resource{Id: TombstoneID(withFreshUid(barID("o"))),
				Data: mustAny(t, &pbresource.Tombstone{Owner: barID("o")})}
		}, "id.type"},
		"too many metadata keys": {with(func(r *pbresource.Resource) {
			r.Metadata = map[string]string{}
			for i := range MaxMetadataKeys + 1 {
				r.Metadata[fmt.Sprint("k", i)] = "v"
			}
		}), "metadata"},
		"metadata key too long": {with(func(r *pbresource.Resource) {
			r.Metadata = map[string]string{strings.Repeat("k", MaxMetadataKeyLength+1): "v"}
		}), "metadata"},
		"metadata value too long": {with(func(r *pbresource.Resource) {
			r.Metadata = map[string]string{"k": strings.Repeat("v", MaxMetadataValueLength+1)}
		}), "metadata"},
		"too many finalizers": {with(func(r *pbresource.Resource) {
			r.Metadata = map[string]string{resource.FinalizerKey: finalizerNames(MaxFinalizers+1, 8)}
		}), "metadata.finalizers"},
		"finalizer name too long": {with(func(r *pbresource.Resource) {
			r.Metadata = map[string]string{resource.FinalizerKey: "a " + strings.Repeat("f", MaxFinalizerNameLength+1)}
		}), "metadata.finalizers"},
		"data too large": {func() *pbresource.Resource { return bar(t, "a", strings.Repeat("x", DefaultMaxResourceBytes)) }, "data"},
	}
}

func TestWrite_InvalidArgument(t *testing.T) {
	env := newEnv(t)
	for name, tc := range writeCases(t) {
		t.Run(name, func(t *testing.T) {
			_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: tc.res()})
			requireCode(t, err, codes.InvalidArgument, field(tc.field))
		})
	}
	requireEmpty(t, env)
}

func TestMutateAndValidate_InvalidArgument(t *testing.T) {
	env := newEnv(t)
	for name, tc := range writeCases(t) {
		switch name {
		case "status on create", "deletion timestamp", "owner missing":
			continue // depend on stored state: Write-only checks
		}
		t.Run(name, func(t *testing.T) {
			_, err := env.client.MutateAndValidate(testCtx(t), &pbresource.MutateAndValidateRequest{Resource: tc.res()})
			requireCode(t, err, codes.InvalidArgument, field(tc.field))
		})
	}
	requireEmpty(t, env)
}

// requireEmpty asserts nothing at all was stored.
func requireEmpty(t *testing.T, env *testEnv) {
	t.Helper()
	for _, typ := range []storage.UnversionedType{
		{Group: "foo", Kind: "Bar"}, {Group: "foo", Kind: "Zip"}, {Group: "foo", Kind: "Qux"},
		storage.UnversionedTypeFrom(resource.TypeV1Tombstone),
	} {
		items, err := env.backend.List(testCtx(t), storage.EventualConsistency, typ,
			&pbresource.Tenancy{Partition: "*", Namespace: "*"}, "")
		require.NoError(t, err)
		require.Empty(t, items, "%v", typ)
		// Cluster- and partition-scoped resources have empty units.
		items, err = env.backend.List(testCtx(t), storage.EventualConsistency, typ, &pbresource.Tenancy{Partition: "*"}, "")
		require.NoError(t, err)
		require.Empty(t, items, "%v", typ)
	}
}

// idCases are malformed IDs, for the RPCs that take one.
func idCases() map[string]struct {
	id    func() *pbresource.ID
	field string
} {
	with := func(f func(id *pbresource.ID)) func() *pbresource.ID {
		return func() *pbresource.ID { id := barID("a"); f(id); return id }
	}
	return map[string]struct {
		id    func() *pbresource.ID
		field string
	}{
		"nil id":            {func() *pbresource.ID { return nil }, "id"},
		"nil type":          {with(func(id *pbresource.ID) { id.Type = nil }), "id.type"},
		"bad group":         {with(func(id *pbresource.ID) { id.Type.Group = "9" }), "id.type.group"},
		"unregistered type": {with(func(id *pbresource.ID) { id.Type.Kind = "Nope" }), "id.type"},
		"empty name":        {with(func(id *pbresource.ID) { id.Name = "" }), "id.name"},
		"bad name":          {with(func(id *pbresource.ID) { id.Name = "a.b" }), "id.name"},
		"bad partition":     {with(func(id *pbresource.ID) { id.Tenancy.Partition = "-" }), "id.tenancy.partition"},
		"bad namespace":     {with(func(id *pbresource.ID) { id.Tenancy.Namespace = "*" }), "id.tenancy.namespace"},
		"qux partition":     {func() *pbresource.ID { id := quxID("q"); id.Tenancy.Partition = "p"; return id }, "id.tenancy.partition"},
		"bad uid":           {with(func(id *pbresource.ID) { id.Uid = "abc" }), "id.uid"},
	}
}

func TestRead_InvalidArgument(t *testing.T) {
	env := newEnv(t)
	for name, tc := range idCases() {
		t.Run(name, func(t *testing.T) {
			_, err := env.client.Read(testCtx(t), &pbresource.ReadRequest{Id: tc.id()})
			requireCode(t, err, codes.InvalidArgument, field(tc.field))
		})
	}
}

func TestDelete_InvalidArgument(t *testing.T) {
	env := newEnv(t)
	for name, tc := range idCases() {
		t.Run(name, func(t *testing.T) {
			_, err := env.client.Delete(testCtx(t), &pbresource.DeleteRequest{Id: tc.id()})
			requireCode(t, err, codes.InvalidArgument, field(tc.field))
		})
	}
}

func TestWriteStatus_InvalidArgument(t *testing.T) {
	env := newEnv(t)
	stored := env.write(t, bar(t, "a", "x"))
	gen := stored.Generation

	for name, tc := range idCases() {
		t.Run("id/"+name, func(t *testing.T) {
			id := tc.id()
			if id != nil && id.Uid == "" {
				id.Uid = stored.Id.Uid
			}
			_, err := env.client.WriteStatus(testCtx(t), &pbresource.WriteStatusRequest{Id: id, Key: "k", Status: simpleStatus(gen)})
			requireCode(t, err, codes.InvalidArgument, field(tc.field))
		})
	}

	idNoUid := barID("a")
	cases := map[string]struct {
		req   *pbresource.WriteStatusRequest
		field string
	}{
		"missing uid":            {&pbresource.WriteStatusRequest{Id: idNoUid, Key: "k", Status: simpleStatus(gen)}, "id.uid"},
		"missing key":            {&pbresource.WriteStatusRequest{Id: stored.Id, Status: simpleStatus(gen)}, "key"},
		"key with space":         {&pbresource.WriteStatusRequest{Id: stored.Id, Key: "a b", Status: simpleStatus(gen)}, "key"},
		"key too long":           {&pbresource.WriteStatusRequest{Id: stored.Id, Key: strings.Repeat("k", 300), Status: simpleStatus(gen)}, "key"},
		"missing status":         {&pbresource.WriteStatusRequest{Id: stored.Id, Key: "k"}, "status"},
		"missing observed gen":   {&pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: simpleStatus("")}, "status.observed_generation"},
		"malformed observed gen": {&pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: simpleStatus("gen-1")}, "status.observed_generation"},
		"condition without type": {&pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: &pbresource.Status{
			ObservedGeneration: gen, Conditions: []*pbresource.Condition{{State: pbresource.Condition_STATE_TRUE}},
		}}, "status.conditions[0].type"},
		"condition bad ref type": {&pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: &pbresource.Status{
			ObservedGeneration: gen, Conditions: []*pbresource.Condition{
				{Type: "A"},
				{Type: "B", Resource: &pbresource.Reference{Type: &pbresource.Type{Group: "x"}, Name: "n"}},
			},
		}}, "status.conditions[1].resource.type.group"},
		"condition missing ref type": {&pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: &pbresource.Status{
			ObservedGeneration: gen, Conditions: []*pbresource.Condition{{Type: "A", Resource: &pbresource.Reference{Name: "n"}}},
		}}, "status.conditions[0].resource.type"},
		"condition bad ref name": {&pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: &pbresource.Status{
			ObservedGeneration: gen, Conditions: []*pbresource.Condition{{Type: "A", Resource: resource.Reference(barID("N"), "")}},
		}}, "status.conditions[0].resource.name"},
		"condition bad ref tenancy": {&pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: &pbresource.Status{
			ObservedGeneration: gen, Conditions: []*pbresource.Condition{{Type: "A", Resource: &pbresource.Reference{
				Type: barID("n").Type, Name: "n", Tenancy: &pbresource.Tenancy{Namespace: "N"},
			}}},
		}}, "status.conditions[0].resource.tenancy.namespace"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := env.client.WriteStatus(testCtx(t), tc.req)
			requireCode(t, err, codes.InvalidArgument, field(tc.field))
		})
	}
	// Nothing changed.
	require.Equal(t, stored.Version, env.mustRead(t, barID("a")).Version)
}

func TestList_InvalidArgument(t *testing.T) {
	env := newEnv(t)
	cases := map[string]struct {
		req   *pbresource.ListRequest
		field string
	}{
		"nil type":      {&pbresource.ListRequest{}, "type"},
		"bad kind":      {&pbresource.ListRequest{Type: &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "b"}}, "type.kind"},
		"unregistered":  {&pbresource.ListRequest{Type: &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Nope"}}, "type"},
		"bad partition": {&pbresource.ListRequest{Type: barID("a").Type, Tenancy: &pbresource.Tenancy{Partition: "P"}}, "tenancy.partition"},
		"bad namespace": {&pbresource.ListRequest{Type: barID("a").Type, Tenancy: &pbresource.Tenancy{Namespace: "n_s"}}, "tenancy.namespace"},
		"zip namespace": {&pbresource.ListRequest{Type: zipID("a").Type, Tenancy: &pbresource.Tenancy{Namespace: "ns"}}, "tenancy.namespace"},
		"qux partition": {&pbresource.ListRequest{Type: quxID("a").Type, Tenancy: &pbresource.Tenancy{Partition: "p"}}, "tenancy.partition"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := env.client.List(testCtx(t), tc.req)
			requireCode(t, err, codes.InvalidArgument, field(tc.field))
		})
		t.Run("watch/"+name, func(t *testing.T) {
			stream, err := env.client.WatchList(testCtx(t), &pbresource.WatchListRequest{Type: tc.req.Type, Tenancy: tc.req.Tenancy})
			require.NoError(t, err)
			_, err = stream.Recv()
			requireCode(t, err, codes.InvalidArgument, field(tc.field))
		})
	}
}

func TestListByOwner_InvalidArgument(t *testing.T) {
	env := newEnv(t)
	cases := map[string]struct {
		owner *pbresource.ID
		field string
	}{
		"nil owner":    {nil, "owner"},
		"missing uid":  {barID("a"), "owner.uid"},
		"bad uid":      {func() *pbresource.ID { id := barID("a"); id.Uid = "u"; return id }(), "owner.uid"},
		"nil type":     {withFreshUid(&pbresource.ID{Name: "a"}), "owner.type"},
		"unregistered": {withFreshUid(&pbresource.ID{Name: "a", Type: &pbresource.Type{Group: "foo", GroupVersion: "v3", Kind: "Bar"}}), "owner.type"},
		"bad name":     {withFreshUid(barID("A")), "owner.name"},
		"bad tenancy":  {withFreshUid(quxID("a")), ""},
	}
	cases["bad tenancy"].owner.Tenancy.Namespace = "ns"
	cases["bad tenancy"] = struct {
		owner *pbresource.ID
		field string
	}{cases["bad tenancy"].owner, "owner.tenancy.namespace"}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := env.client.ListByOwner(testCtx(t), &pbresource.ListByOwnerRequest{Owner: tc.owner})
			requireCode(t, err, codes.InvalidArgument, field(tc.field))
		})
	}
}

func TestCheckData_AnyWithoutPrefix(t *testing.T) {
	// A type URL without a host part still names the message.
	env := newEnv(t)
	res := bar(t, "a", "x")
	res.Data = &anypb.Any{TypeUrl: "loom.example.foo.v1.Bar", Value: res.Data.Value}
	env.write(t, res)
}

// TestCheckStatusKey checks the key check's fast path for printable ASCII
// against its check of runes.
func TestCheckStatusKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"bench.widget": true, "a/b:c~!": true, "é-ü": true, "名前": true,
		"": false, "a b": false, "a\tb": false, "\x7f": false, "a\x00": false,
		"a\u00a0b": false, "\xff": false, "a\u2028b": false,
	} {
		err := checkStatusKey(key)
		if ok {
			assert.NoError(t, err, "%q", key)
		} else {
			assert.Error(t, err, "%q", key)
		}
	}
}
