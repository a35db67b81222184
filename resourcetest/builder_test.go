package resourcetest_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
)

func TestBuildHoldsWhatWasDeclared(t *testing.T) {
	owner := &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "z", Uid: resource.NewULID()}
	st := &pbresource.Status{ObservedGeneration: resource.NewULID(), Conditions: []*pbresource.Condition{accepted("Test")}}
	gen := resource.NewULID()
	b := resourcetest.Resource(foo.BarV1Type, "bar").
		WithTenancy(&pbresource.Tenancy{Partition: "p", Namespace: "n"}).
		WithData(t, &pbfoov1.Bar{Baz: "x"}).
		WithOwner(owner).
		WithMeta("k", "v").
		WithStatus("s", st).
		WithVersion("42").
		WithGeneration(gen)

	res := b.Build()
	require.Equal(t, "foo.v1.Bar/p.n/bar", resource.IDString(res.Id))
	require.True(t, proto.Equal(owner, res.Owner))
	require.Equal(t, map[string]string{"k": "v"}, res.Metadata)
	require.True(t, proto.Equal(st, res.Status["s"]))
	require.Equal(t, "42", res.Version)
	require.Equal(t, gen, res.Generation)
	bar, err := resource.Decode[*pbfoov1.Bar](res)
	require.NoError(t, err)
	require.Equal(t, "x", bar.Baz)

	// Build hands out copies: changing one changes neither the builder nor
	// the next Build.
	res.Id.Name = "changed"
	res.Status["s"].Conditions = nil
	again := b.Build()
	require.Equal(t, "bar", again.Id.Name)
	require.Len(t, again.Status["s"].Conditions, 1)

	ref := b.Reference("section")
	require.Equal(t, "section", ref.Section)
	require.Equal(t, "foo.v1.Bar/p.n/bar", resource.ReferenceString(ref))
}

func TestIDTenancy(t *testing.T) {
	// Unbound: empty units stay empty (the service fills them on write).
	require.Equal(t, "foo.v1.Bar/./bar", resource.IDString(resourcetest.Resource(foo.BarV1Type, "bar").ID()))

	// Bound to a registry: the scope's defaults, as the service stores them.
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	cases := map[*pbresource.Type]string{
		foo.BarV1Type: "foo.v1.Bar/default.default/b",
		foo.ZipType:   "foo.v1.Zip/default./b",
		foo.QuxType:   "foo.v1.Qux/./b",
	}
	for typ, want := range cases {
		require.Equal(t, want, resource.IDString(resourcetest.Resource(typ, "b").WithRegistry(reg).ID()))
	}
	// Units that were given are kept.
	id := resourcetest.Resource(foo.BarV1Type, "b").WithRegistry(reg).WithTenancy(&pbresource.Tenancy{Namespace: "ns"}).ID()
	require.Equal(t, "foo.v1.Bar/default.ns/b", resource.IDString(id))
	// A type the registry does not know is left alone.
	other := &pbresource.Type{Group: "other", GroupVersion: "v1", Kind: "Thing"}
	require.Equal(t, "other.v1.Thing/./b", resource.IDString(resourcetest.Resource(other, "b").WithRegistry(reg).ID()))

	// What the builder predicts is what the service stores.
	svc := startService(t)
	for typ := range cases {
		b := svc.Resource(typ, "b")
		var data proto.Message = &pbfoov1.Zip{Zap: "z"}
		switch typ {
		case foo.BarV1Type:
			data = &pbfoov1.Bar{Baz: "b"}
		case foo.QuxType:
			data = &pbfoov1.Qux{Note: "q"}
		}
		written := b.WithData(t, data).Write(t, svc.Client)
		want := b.ID()
		want.Uid = written.Id.Uid
		require.True(t, proto.Equal(want, written.Id), "predicted %s, stored %s", resource.IDString(want), resource.IDString(written.Id))
	}
}

func TestWriteStoresStatuses(t *testing.T) {
	for _, overGRPC := range []bool{false, true} {
		name := "in-process"
		var opts []resourcetest.ServiceOption
		if overGRPC {
			name = "over gRPC"
			opts = append(opts, resourcetest.OverGRPC())
		}
		t.Run(name, func(t *testing.T) {
			svc := startService(t, opts...)
			res := resourcetest.Resource(foo.BarV1Type, "bar").
				WithData(t, &pbfoov1.Bar{Baz: "Hello"}).
				WithStatus("b", &pbresource.Status{Conditions: []*pbresource.Condition{accepted("B")}}).
				WithStatus("a", &pbresource.Status{Conditions: []*pbresource.Condition{accepted("A")}}).
				Write(t, svc.Client)

			require.Equal(t, "foo.v1.Bar/default.default/bar", resource.IDString(&pbresource.ID{Type: res.Id.Type, Tenancy: res.Id.Tenancy, Name: res.Id.Name}))
			require.True(t, resource.IsULID(res.Id.Uid))
			bar, err := resource.Decode[*pbfoov1.Bar](res)
			require.NoError(t, err)
			require.Equal(t, "hello", bar.Baz, "the returned resource is the stored one, after the Mutate hook")
			require.Len(t, res.Status, 2)
			for key, reason := range map[string]string{"a": "A", "b": "B"} {
				require.Equal(t, res.Generation, res.Status[key].ObservedGeneration, "an empty observed generation is the written generation")
				require.Equal(t, reason, res.Status[key].Conditions[0].Reason)
			}
			stored := resourcetest.NewClient(svc.Client).RequireResourceExists(t, res.Id)
			require.Equal(t, res.Version, stored.Version)
		})
	}
}

func TestWriteUpdatesAnExistingResourceWithStatus(t *testing.T) {
	svc := startService(t)
	b := resourcetest.Resource(foo.BarV1Type, "bar").
		WithData(t, &pbfoov1.Bar{Baz: "one"}).
		WithStatus("s", &pbresource.Status{Conditions: []*pbresource.Condition{accepted("One")}})
	first := b.Write(t, svc.Client)

	// Writing the builder again, with other data and status, updates both:
	// the status is not sent with the Write (which would be refused).
	second := b.WithData(t, &pbfoov1.Bar{Baz: "two"}).
		WithStatus("s", &pbresource.Status{Conditions: []*pbresource.Condition{accepted("Two")}}).
		Write(t, svc.Client)
	require.Equal(t, first.Id.Uid, second.Id.Uid)
	require.NotEqual(t, first.Generation, second.Generation)
	require.Equal(t, second.Generation, second.Status["s"].ObservedGeneration)
	require.Equal(t, "Two", second.Status["s"].Conditions[0].Reason)
}

func TestWriteRetriesStatusConflicts(t *testing.T) {
	svc := startService(t)
	other := resourcetest.NewClient(svc.Client)
	// Before the builder's first status write lands, someone else writes
	// the resource, so that write's compare-and-swap fails for real.
	client := &hookClient{ResourceServiceClient: svc.Client, beforeWriteStatus: func(n int) error {
		if n == 1 {
			resourcetest.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "changed"}).Write(t, other)
		}
		return nil
	}}
	res := resourcetest.Resource(foo.BarV1Type, "bar").
		WithData(t, &pbfoov1.Bar{Baz: "original"}).
		WithStatus("s", &pbresource.Status{Conditions: []*pbresource.Condition{accepted("A")}}).
		Write(t, client)

	require.Equal(t, 2, client.writeStatuses, "the conflicting status write is retried once")
	require.Equal(t, "A", res.Status["s"].Conditions[0].Reason)
	require.Equal(t, res.Generation, res.Status["s"].ObservedGeneration, "the retry observes the generation it was written for")
	bar, err := resource.Decode[*pbfoov1.Bar](res)
	require.NoError(t, err)
	require.Equal(t, "changed", bar.Baz)
}

func TestWriteRetriesAbortedBlanketWrites(t *testing.T) {
	svc := startService(t)
	client := &hookClient{ResourceServiceClient: svc.Client, beforeWrite: func(n int) error {
		if n <= 2 {
			return status.Error(codes.Aborted, "gave up")
		}
		return nil
	}}
	res := resourcetest.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, client)
	require.Equal(t, 3, client.writes)
	require.NotEmpty(t, res.Version)
}

func TestWriteFailures(t *testing.T) {
	svc := startService(t)

	t.Run("the service refuses the resource", func(t *testing.T) {
		f := runFake(func(ft *fakeT) {
			resourcetest.Resource(foo.BarV1Type, "bar").WithData(ft, &pbfoov1.Bar{}).Write(ft, svc.Client)
		})
		requireFailed(t, f, true, "writing foo.v1.Bar/./bar", "InvalidArgument", `"baz"`)
	})

	t.Run("a versioned write conflicts", func(t *testing.T) {
		written := resourcetest.Resource(foo.BarV1Type, "versioned").WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, svc.Client)
		client := &hookClient{ResourceServiceClient: svc.Client}
		f := runFake(func(ft *fakeT) {
			resourcetest.ResourceID(written.Id).
				WithVersion("999999").
				WithData(ft, &pbfoov1.Bar{Baz: "y"}).
				Write(ft, client)
		})
		requireFailed(t, f, true, "writing foo.v1.Bar/default.default/versioned", "Aborted")
		require.Equal(t, 1, client.writes, "a real conflict is not retried")
	})

	t.Run("a status the service refuses", func(t *testing.T) {
		f := runFake(func(ft *fakeT) {
			resourcetest.Resource(foo.BarV1Type, "bad-status").
				WithData(ft, &pbfoov1.Bar{Baz: "x"}).
				WithStatus("s", &pbresource.Status{Conditions: []*pbresource.Condition{{}}}).
				Write(ft, svc.Client)
		})
		requireFailed(t, f, true, `writing status "s" of foo.v1.Bar/default.default/bad-status`, "type")
	})
}

func TestWriteKeepsStoredFinalizers(t *testing.T) {
	svc := startService(t)
	other := resourcetest.NewClient(svc.Client)
	resourcetest.Resource(foo.BarV1Type, "bar").
		WithData(t, &pbfoov1.Bar{Baz: "one"}).
		WithMeta(resource.FinalizerKey, "ctl/a").
		Write(t, svc.Client)

	// A controller adds a finalizer between the builder's read and its
	// write: the write conflicts and is retried, keeping both.
	client := &hookClient{ResourceServiceClient: svc.Client, beforeWrite: func(n int) error {
		if n == 1 {
			resourcetest.Resource(foo.BarV1Type, "bar").
				WithData(t, &pbfoov1.Bar{Baz: "one"}).
				WithMeta(resource.FinalizerKey, "ctl/a ctl/b").
				Write(t, other)
		}
		return nil
	}}
	res := resourcetest.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "two"}).Write(t, client)
	require.Equal(t, 2, client.writes, "the write that lost the race is retried once")
	require.Equal(t, []string{"ctl/a", "ctl/b"}, resource.Finalizers(res))
	bar, err := resource.Decode[*pbfoov1.Bar](res)
	require.NoError(t, err)
	require.Equal(t, "two", bar.Baz)

	// Finalizers the builder sets replace the stored ones.
	res = resourcetest.Resource(foo.BarV1Type, "bar").
		WithData(t, &pbfoov1.Bar{Baz: "two"}).
		WithMeta(resource.FinalizerKey, "ctl/c").
		Write(t, svc.Client)
	require.Equal(t, []string{"ctl/c"}, resource.Finalizers(res))
}
