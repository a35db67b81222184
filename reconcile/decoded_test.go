package reconcile_test

import (
	"context"
	"testing"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func barID(name string, typ *pbresource.Type) *pbresource.ID {
	return &pbresource.ID{Type: typ, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name, Uid: "uid-" + name}
}

// decodedRuntime returns a Runtime whose cache holds a foo.v1.Bar "v1" and
// a foo.v2.Bar "v2".
func decodedRuntime(t *testing.T) reconcile.Runtime {
	c := cache.New()
	require.NoError(t, c.AddType(foo.BarV1Type))
	for name, msg := range map[string]proto.Message{"v1": &pbfoov1.Bar{Baz: "one"}, "v2": &pbfoov2.Bar{Baz: "two"}} {
		data, err := anypb.New(msg)
		require.NoError(t, err)
		typ := foo.BarV1Type
		if name == "v2" {
			typ = foo.BarV2Type
		}
		_, err = c.Upsert(&pbresource.Resource{Id: barID(name, typ), Version: "1", Data: data})
		require.NoError(t, err)
	}
	return reconcile.Runtime{Cache: c}
}

func TestAsDecoded(t *testing.T) {
	rt := decodedRuntime(t)
	ctx := context.Background()
	var got *resource.Decoded[*pbfoov1.Bar]
	rec := reconcile.AsDecoded(func(_ context.Context, _ reconcile.Runtime, req reconcile.Request, res *resource.Decoded[*pbfoov1.Bar]) error {
		assert.Equal(t, req.ID.Name, res.Resource.Id.Name)
		got = res
		res.Data.Baz = "changed by the reconciler" // its own copy
		return nil
	})
	require.NoError(t, rec.Reconcile(ctx, rt, reconcile.Request{ID: barID("v1", foo.BarV1Type)}))
	require.NotNil(t, got)
	assert.Equal(t, "1", got.Resource.Version)
	again, err := cache.GetDecodedByIDReadOnly[*pbfoov1.Bar](rt.Cache, barID("v1", foo.BarV1Type))
	require.NoError(t, err)
	assert.Equal(t, "one", again.Data.Baz, "the cache's copy is untouched")

	// Not in the cache: skipped.
	got = nil
	require.NoError(t, rec.Reconcile(ctx, rt, reconcile.Request{ID: barID("gone", foo.BarV1Type)}))
	assert.Nil(t, got)

	// Data of another message: a terminal error, fn not called.
	err = rec.Reconcile(ctx, rt, reconcile.Request{ID: barID("v2", foo.BarV1Type)})
	assert.True(t, reconcile.IsTerminalError(err), "got %v", err)
	var parse resource.ErrDataParse
	assert.ErrorAs(t, err, &parse)
	assert.Nil(t, got)

	// Another failure of the cache (a type it does not hold) is retried.
	err = rec.Reconcile(ctx, rt, reconcile.Request{ID: barID("x", foo.ZipType)})
	require.Error(t, err)
	assert.False(t, reconcile.IsTerminalError(err))
}

// A request names the resource by name: one that carries the Uid of an
// earlier lifetime (the queue keys by name, and owner mappers map to the
// owner by name) reconciles the resource that has the name now, through
// every way AsDecoded reads.
func TestAsDecodedReconcilesTheCurrentLifetime(t *testing.T) {
	rt := decodedRuntime(t)
	ctx := context.Background()
	earlier := func(name string) reconcile.Request {
		id := barID(name, foo.BarV1Type)
		id.Uid = "uid-of-an-earlier-" + name
		return reconcile.Request{ID: id}
	}
	for _, opts := range [][]reconcile.DecodedOption{nil, {reconcile.DecodedReadOnly()}} {
		var got *resource.Decoded[*pbfoov1.Bar]
		var gotReq reconcile.Request
		rec := reconcile.AsDecoded(func(_ context.Context, _ reconcile.Runtime, req reconcile.Request, res *resource.Decoded[*pbfoov1.Bar]) error {
			got, gotReq = res, req
			return nil
		}, opts...)
		req := earlier("v1")
		require.NoError(t, rec.Reconcile(ctx, rt, req))
		require.NotNil(t, got, "the current Bar is reconciled")
		assert.Equal(t, "uid-v1", got.Resource.Id.Uid)
		assert.Equal(t, "one", got.Data.Baz)
		assert.Same(t, req.ID, gotReq.ID, "fn gets the request as queued")

		// Still skipped when nothing has the name.
		got = nil
		require.NoError(t, rec.Reconcile(ctx, rt, earlier("gone")))
		assert.Nil(t, got)
	}

	// The request for the current lifetime, the usual case, pays nothing
	// for the fallback.
	readOnly := reconcile.AsDecoded(func(context.Context, reconcile.Runtime, reconcile.Request, *resource.Decoded[*pbfoov1.Bar]) error {
		return nil
	}, reconcile.DecodedReadOnly())
	current := reconcile.Request{ID: barID("v1", foo.BarV1Type)}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = readOnly.Reconcile(ctx, rt, current) }))

	var undecodable *pbresource.Resource
	rec := reconcile.AsDecoded(func(context.Context, reconcile.Runtime, reconcile.Request, *resource.Decoded[*pbfoov1.Bar]) error {
		t.Error("fn called for undecodable data")
		return nil
	}, reconcile.OnUndecodable(func(_ context.Context, _ reconcile.Runtime, _ reconcile.Request, res *pbresource.Resource, _ error) error {
		undecodable = res
		return nil
	}))
	require.NoError(t, rec.Reconcile(ctx, rt, earlier("v2")))
	require.NotNil(t, undecodable)
	assert.Equal(t, "uid-v2", undecodable.Id.Uid)
}

func TestAsDecodedReadOnly(t *testing.T) {
	rt := decodedRuntime(t)
	var got *resource.Decoded[*pbfoov1.Bar]
	rec := reconcile.AsDecoded(func(_ context.Context, _ reconcile.Runtime, _ reconcile.Request, res *resource.Decoded[*pbfoov1.Bar]) error {
		got = res
		return nil
	}, reconcile.DecodedReadOnly())
	require.NoError(t, rec.Reconcile(context.Background(), rt, reconcile.Request{ID: barID("v1", foo.BarV1Type)}))
	shared, err := cache.GetDecodedByIDReadOnly[*pbfoov1.Bar](rt.Cache, barID("v1", foo.BarV1Type))
	require.NoError(t, err)
	assert.Same(t, shared, got, "the read-only form hands out the cache's own")
}

func TestAsDecodedOnUndecodable(t *testing.T) {
	rt := decodedRuntime(t)
	var undecodable *pbresource.Resource
	rec := reconcile.AsDecoded(func(context.Context, reconcile.Runtime, reconcile.Request, *resource.Decoded[*pbfoov1.Bar]) error {
		t.Error("fn called for undecodable data")
		return nil
	}, reconcile.OnUndecodable(func(_ context.Context, _ reconcile.Runtime, _ reconcile.Request, res *pbresource.Resource, err error) error {
		var parse resource.ErrDataParse
		assert.ErrorAs(t, err, &parse)
		undecodable = res
		return nil
	}))
	require.NoError(t, rec.Reconcile(context.Background(), rt, reconcile.Request{ID: barID("v2", foo.BarV1Type)}))
	require.NotNil(t, undecodable)
	assert.Equal(t, "v2", undecodable.Id.Name)
}
