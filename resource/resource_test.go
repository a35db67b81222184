package resource_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

var barType = &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Bar"}

func TestValidateName(t *testing.T) {
	for _, ok := range []string{"a", "a1", "web-1", "0abc", strings.Repeat("x", 63)} {
		assert.NoError(t, resource.ValidateName(ok), ok)
	}
	for _, bad := range []string{"", "-a", "a-", "A", "a_b", "a.b", "é", strings.Repeat("x", 64), "a b"} {
		assert.Error(t, resource.ValidateName(bad), bad)
	}
}

func TestValidateTypeNamesField(t *testing.T) {
	cases := map[string]*pbresource.Type{
		"id.type":               nil,
		"id.type.group":         {Group: "Foo", GroupVersion: "v1", Kind: "Bar"},
		"id.type.group_version": {Group: "foo", GroupVersion: "1", Kind: "Bar"},
		"id.type.kind":          {Group: "foo", GroupVersion: "v1", Kind: "bar"},
	}
	for field, typ := range cases {
		err := resource.ValidateTypeField("id.type", typ)
		var fe resource.ErrInvalidField
		require.ErrorAs(t, err, &fe, field)
		assert.Equal(t, field, fe.Name)
		assert.Contains(t, err.Error(), field)
	}
	assert.NoError(t, resource.ValidateType(&pbresource.Type{Group: "foo", GroupVersion: "v2beta1", Kind: "Bar"}))
}

func TestNormalizeTenancy(t *testing.T) {
	type tc struct {
		scope    resource.Scope
		in       *pbresource.Tenancy
		wildcard bool
		want     *pbresource.Tenancy
		errField string
	}
	cases := map[string]tc{
		"namespace defaults":         {resource.ScopeNamespace, nil, false, &pbresource.Tenancy{Partition: "default", Namespace: "default"}, ""},
		"namespace given":            {resource.ScopeNamespace, &pbresource.Tenancy{Partition: "p", Namespace: "n"}, false, &pbresource.Tenancy{Partition: "p", Namespace: "n"}, ""},
		"namespace bad name":         {resource.ScopeNamespace, &pbresource.Tenancy{Namespace: "N!"}, false, nil, "t.namespace"},
		"namespace wildcard refused": {resource.ScopeNamespace, &pbresource.Tenancy{Namespace: "*"}, false, nil, "t.namespace"},
		"namespace wildcard":         {resource.ScopeNamespace, &pbresource.Tenancy{Partition: "*", Namespace: "*"}, true, &pbresource.Tenancy{Partition: "*", Namespace: "*"}, ""},
		"partition default":          {resource.ScopePartition, &pbresource.Tenancy{}, false, &pbresource.Tenancy{Partition: "default"}, ""},
		"partition with namespace":   {resource.ScopePartition, &pbresource.Tenancy{Namespace: "default"}, false, nil, "t.namespace"},
		"partition wildcard ns":      {resource.ScopePartition, &pbresource.Tenancy{Namespace: "*"}, true, &pbresource.Tenancy{Partition: "default"}, ""},
		"cluster empty":              {resource.ScopeCluster, nil, false, &pbresource.Tenancy{}, ""},
		"cluster with partition":     {resource.ScopeCluster, &pbresource.Tenancy{Partition: "default"}, false, nil, "t.partition"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := resource.NormalizeTenancy("t", c.scope, c.in, c.wildcard)
			if c.errField != "" {
				var fe resource.ErrInvalidField
				require.ErrorAs(t, err, &fe)
				assert.Equal(t, c.errField, fe.Name)
				return
			}
			require.NoError(t, err)
			assert.True(t, resource.EqualTenancy(c.want, got), "got %v", got)
		})
	}
}

func TestRegistry(t *testing.T) {
	r := resource.NewRegistry()
	reg := resource.Registration[*pbresource.Tombstone]{Type: barType, Scope: resource.ScopeNamespace}
	require.NoError(t, resource.Register(r, reg))

	got, ok := r.Resolve(&pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Bar"})
	require.True(t, ok)
	assert.Equal(t, resource.ScopeNamespace, got.Scope)
	assert.Equal(t, "hashicorp.consul.resource.Tombstone", string(got.MessageName()))
	_, ok = r.Resolve(&pbresource.Type{Group: "foo", GroupVersion: "v2", Kind: "Bar"})
	assert.False(t, ok)

	assert.EqualError(t, resource.Register(r, reg), "registering type foo.v1.Bar: already registered")
	assert.PanicsWithError(t, "registering type foo.v1.Bar: already registered", func() { resource.MustRegister(r, reg) })
	assert.Error(t, resource.Register(r, resource.Registration[*pbresource.Tombstone]{Type: &pbresource.Type{Group: "foo", GroupVersion: "v3", Kind: "Bar"}}), "missing scope")
	err := resource.Register(r, resource.Registration[*pbresource.Tombstone]{Type: &pbresource.Type{Group: "foo", GroupVersion: "v2", Kind: "Bar"}, Scope: resource.ScopeCluster})
	assert.ErrorContains(t, err, "scope")

	// An interface type needs its Message; a Message must make Ts.
	v4 := &pbresource.Type{Group: "foo", GroupVersion: "v4", Kind: "Bar"}
	assert.ErrorContains(t, resource.Register(r, resource.Registration[proto.Message]{Type: v4, Scope: resource.ScopeNamespace}), "Message is required")
	assert.ErrorContains(t, resource.Register(r, resource.Registration[*pbresource.Tombstone]{Type: v4, Scope: resource.ScopeNamespace,
		Message: (&pbresource.ID{}).ProtoReflect().Type()}), "not *pbresource.Tombstone")
	require.NoError(t, resource.Register(r, resource.Registration[proto.Message]{Type: v4, Scope: resource.ScopeNamespace,
		Message: (&pbresource.Tombstone{}).ProtoReflect().Type()}))

	// The registry keeps its own copy of the type.
	barType.Kind = "Changed"
	defer func() { barType.Kind = "Bar" }()
	_, ok = r.Resolve(&pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Bar"})
	assert.True(t, ok)
}

func TestRegistryConcurrentResolve(t *testing.T) {
	r := resource.NewRegistry()
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 100; j++ {
				r.Resolve(&pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Bar"})
				_ = r.Types()
			}
		}()
	}
	require.NoError(t, resource.Register(r, resource.Registration[*pbresource.Tombstone]{Type: &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Bar"}, Scope: resource.ScopeCluster}))
	wg.Wait()
	assert.Len(t, r.Types(), 1)
}

func TestEqualStatusIgnoresUpdatedAt(t *testing.T) {
	a := &pbresource.Status{ObservedGeneration: "g1", Conditions: []*pbresource.Condition{{Type: "Accepted", State: pbresource.Condition_STATE_TRUE}}, UpdatedAt: timestamppb.Now()}
	b := &pbresource.Status{ObservedGeneration: "g1", Conditions: []*pbresource.Condition{{Type: "Accepted", State: pbresource.Condition_STATE_TRUE}}}
	assert.True(t, resource.EqualStatus(a, b))
	b.Conditions[0].Reason = "Ok"
	assert.False(t, resource.EqualStatus(a, b))
	b.Conditions[0].Reason = ""
	b.ObservedGeneration = "g2"
	assert.False(t, resource.EqualStatus(a, b))
	assert.False(t, resource.EqualStatus(a, nil))
	assert.True(t, resource.EqualStatusMap(map[string]*pbresource.Status{"k": a}, map[string]*pbresource.Status{"k": a}))
	assert.False(t, resource.EqualStatusMap(map[string]*pbresource.Status{"k": a}, map[string]*pbresource.Status{"j": a}))
}

func TestStringsAndReferences(t *testing.T) {
	id := &pbresource.ID{Type: barType, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "ns"}, Name: "web", Uid: "01H"}
	assert.Equal(t, "foo.v1.Bar", resource.TypeString(barType))
	assert.Equal(t, "foo.v1.Bar/default.ns/web@01H", resource.IDString(id))
	ref := resource.Reference(id, "port")
	assert.Equal(t, "port", ref.Section)
	assert.True(t, resource.EqualReferenceOrID(ref, id))
	back := resource.IDFromReference(ref)
	assert.Empty(t, back.Uid)
	assert.True(t, resource.EqualReferenceOrID(back, id))

	typ, err := resource.ParseType("foo.v1.Bar")
	require.NoError(t, err)
	assert.True(t, resource.EqualType(typ, barType))
	_, err = resource.ParseType("foo.Bar")
	assert.Error(t, err)
}

func TestULID(t *testing.T) {
	prev := resource.NewULID()
	for i := 0; i < 1000; i++ {
		next := resource.NewULID()
		require.True(t, resource.IsULID(next))
		require.Less(t, prev, next, "ULIDs from one process sort in creation order")
		prev = next
	}
	assert.False(t, resource.IsULID("not-a-ulid"))
	// IsULID agrees with ulid.ParseStrict on every byte in every place.
	valid := resource.NewULID()
	for i := range len(valid) {
		for c := range 256 {
			s := valid[:i] + string([]byte{byte(c)}) + valid[i+1:]
			_, err := ulid.ParseStrict(s)
			require.Equal(t, err == nil, resource.IsULID(s), "%q", s)
		}
	}
	assert.False(t, resource.IsULID(valid[1:]))
	assert.False(t, resource.IsULID(valid+"0"))
	// Every write makes one or two: the string is the only allocation.
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = resource.NewULID() }))
}

func TestNewULIDPair(t *testing.T) {
	prev := resource.NewULID()
	for i := 0; i < 1000; i++ {
		a, b := resource.NewULIDPair()
		require.True(t, resource.IsULID(a), "%q", a)
		require.True(t, resource.IsULID(b), "%q", b)
		require.Less(t, prev, a, "ULIDs from one process sort in creation order")
		require.Less(t, a, b, "the second is made after the first")
		prev = b
	}
	require.Less(t, prev, resource.NewULID())
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _, _ = resource.NewULIDPair() }))
}

func BenchmarkNewULID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = resource.NewULID()
	}
}

func TestFinalizers(t *testing.T) {
	res := &pbresource.Resource{Metadata: map[string]string{resource.FinalizerKey: " a b  a c "}}
	assert.Equal(t, []string{"a", "b", "c"}, resource.Finalizers(res))
	assert.Nil(t, resource.Finalizers(&pbresource.Resource{}))
	assert.False(t, resource.IsMarkedForDeletion(res))
	res.Metadata[resource.DeletionTimestampKey] = "2026-01-01T00:00:00Z"
	assert.True(t, resource.IsMarkedForDeletion(res))
}

// registered registers reg in a new registry and returns what it holds.
func registered[T proto.Message](t *testing.T, reg resource.Registration[T]) resource.Registered {
	t.Helper()
	r := resource.NewRegistry()
	require.NoError(t, resource.Register(r, reg))
	got, ok := r.Resolve(reg.Type)
	require.True(t, ok)
	return got
}

func TestACLDefaults(t *testing.T) {
	reg := registered(t, resource.Registration[*pbresource.Tombstone]{Type: barType, Scope: resource.ScopeNamespace})
	id := &pbresource.ID{Type: barType, Name: "x"}
	assert.NoError(t, reg.AuthorizeRead(resource.AllowAll, id, nil))
	err := reg.AuthorizeWrite(resource.DenyAll, &pbresource.Resource{Id: id}, nil)
	assert.True(t, errors.Is(err, resource.ErrPermissionDenied))
	assert.ErrorContains(t, err, "write access to foo.v1.Bar")
	assert.ErrorIs(t, reg.AuthorizeList(resource.DenyAll, nil), resource.ErrPermissionDenied)
}

func TestACLHooksGetDecodedData(t *testing.T) {
	var reads, writes []string
	reg := registered(t, resource.Registration[*pbresource.Tombstone]{
		Type: barType, Scope: resource.ScopeNamespace,
		ACLs: &resource.ACLHooks[*pbresource.Tombstone]{
			Read: func(_ resource.Authorizer, id *pbresource.ID, res *resource.Decoded[*pbresource.Tombstone]) error {
				if res == nil {
					reads = append(reads, "missing "+id.Name)
					return resource.ErrPermissionDenied
				}
				reads = append(reads, res.Data.Owner.GetName())
				return nil
			},
			Write: func(_ resource.Authorizer, res *resource.Decoded[*pbresource.Tombstone]) error {
				writes = append(writes, res.Resource.Id.Name+"="+res.Data.GetOwner().GetName())
				return nil
			},
			List: func(resource.Authorizer, *pbresource.Tenancy) error { return nil },
		},
	})
	data, err := anypb.New(&pbresource.Tombstone{Owner: &pbresource.ID{Name: "o"}})
	require.NoError(t, err)
	id := &pbresource.ID{Type: barType, Name: "x"}
	res := &pbresource.Resource{Id: id, Data: data}

	assert.NoError(t, reg.AuthorizeRead(resource.DenyAll, id, res))
	assert.ErrorIs(t, reg.AuthorizeRead(resource.AllowAll, id, nil), resource.ErrPermissionDenied)
	assert.Equal(t, []string{"o", "missing x"}, reads)

	// Decoded data is used as given; nil has it decoded; no data is the zero T.
	require.NoError(t, reg.AuthorizeWrite(resource.DenyAll, res, &pbresource.Tombstone{Owner: &pbresource.ID{Name: "given"}}))
	require.NoError(t, reg.AuthorizeWrite(resource.DenyAll, res, nil))
	require.NoError(t, reg.AuthorizeWrite(resource.DenyAll, &pbresource.Resource{Id: id}, nil))
	assert.Equal(t, []string{"x=given", "x=o", "x="}, writes)
	assert.NoError(t, reg.AuthorizeList(resource.DenyAll, nil))

	// Data that does not decode is an error, not a decision.
	bad := &pbresource.Resource{Id: id, Data: &anypb.Any{TypeUrl: data.TypeUrl, Value: []byte{0xff}}}
	err = reg.AuthorizeRead(resource.AllowAll, id, bad)
	assert.ErrorContains(t, err, "decoding the data of foo.v1.Bar")
	assert.NotErrorIs(t, err, resource.ErrPermissionDenied)
}

func TestMutateAndValidateHooks(t *testing.T) {
	reg := registered(t, resource.Registration[*pbresource.Tombstone]{
		Type: barType, Scope: resource.ScopeNamespace,
		Mutate: func(res *resource.Decoded[*pbresource.Tombstone]) error {
			res.Data = &pbresource.Tombstone{Owner: &pbresource.ID{Name: "replaced"}}
			return nil
		},
		Validate: func(res *resource.Decoded[*pbresource.Tombstone]) error {
			if res.Data.Owner.GetName() == "" {
				return resource.ErrInvalidField{Name: "owner", Wrapped: resource.ErrMissing}
			}
			return nil
		},
	})
	assert.True(t, reg.HasMutate())
	got, err := reg.Mutate(&pbresource.Resource{}, &pbresource.Tombstone{})
	require.NoError(t, err)
	assert.Equal(t, "replaced", got.(*pbresource.Tombstone).Owner.Name)
	assert.NoError(t, reg.Validate(&pbresource.Resource{}, got))
	assert.ErrorContains(t, reg.Validate(&pbresource.Resource{}, &pbresource.Tombstone{}), "owner")

	plain := registered(t, resource.Registration[*pbresource.Tombstone]{Type: barType, Scope: resource.ScopeNamespace})
	assert.False(t, plain.HasMutate())
	in := &pbresource.Tombstone{}
	got, err = plain.Mutate(&pbresource.Resource{}, in)
	require.NoError(t, err)
	assert.Same(t, in, got)
}

func TestDecode(t *testing.T) {
	data, err := anypb.New(&pbresource.Tombstone{Owner: &pbresource.ID{Name: "o"}})
	require.NoError(t, err)
	got, err := resource.Decode[*pbresource.Tombstone](&pbresource.Resource{Data: data})
	require.NoError(t, err)
	assert.Equal(t, "o", got.Owner.Name)

	_, err = resource.Decode[*pbresource.Status](&pbresource.Resource{Data: data})
	var pe resource.ErrDataParse
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "hashicorp.consul.resource.Status", pe.TypeName)
	_, err = resource.Decode[*pbresource.Status](&pbresource.Resource{})
	assert.ErrorAs(t, err, &pe)
}

func TestFinalizersManyAndRepeated(t *testing.T) {
	// Past the size where pairs are compared, the names go through a set;
	// both paths keep the first of each name, in stored order.
	for _, n := range []int{3, 16, 17, 1000} {
		var names, want []string
		for i := range n {
			name := fmt.Sprint("f", i)
			names = append(names, name, fmt.Sprint("f", i/2)) // repeats an earlier name
			want = append(want, name)
		}
		res := &pbresource.Resource{Metadata: map[string]string{resource.FinalizerKey: "  " + strings.Join(names, "  \t") + " "}}
		assert.Equal(t, want, resource.Finalizers(res), "n=%d", n)
		assert.True(t, resource.HasFinalizers(res))
	}
	assert.False(t, resource.HasFinalizers(&pbresource.Resource{}))
	assert.False(t, resource.HasFinalizers(&pbresource.Resource{Metadata: map[string]string{resource.FinalizerKey: " \t "}}))
	assert.Empty(t, resource.Finalizers(&pbresource.Resource{Metadata: map[string]string{resource.FinalizerKey: " "}}))
}

// BenchmarkFinalizers shows resource.Finalizers is linear: ns/finalizer
// stays flat from 10 to 100,000 names (it grew with n when repeats were
// found by comparing every pair).
func BenchmarkFinalizers(b *testing.B) {
	for _, n := range []int{10, 1_000, 100_000} {
		names := make([]string, n)
		for i := range names {
			names[i] = fmt.Sprint("example.com/finalizer-", i)
		}
		res := &pbresource.Resource{Metadata: map[string]string{resource.FinalizerKey: strings.Join(names, " ")}}
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if len(resource.Finalizers(res)) != n {
					b.Fatal("wrong count")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/finalizer")
		})
	}
}

func BenchmarkIsULID(b *testing.B) {
	id := resource.NewULID()
	for b.Loop() {
		_ = resource.IsULID(id)
	}
}
