package controller_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/anypb"
)

// writeOwnedBar writes a Bar owned by owner.
func writeOwnedBar(t *testing.T, client pbresource.ResourceServiceClient, name string, owner *pbresource.ID) *pbresource.Resource {
	t.Helper()
	data, err := anypb.New(&pbfoov1.Bar{Baz: name})
	require.NoError(t, err)
	rsp, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: barID(name), Owner: owner, Data: data}})
	require.NoError(t, err)
	return rsp.Resource
}

// A change to an owned resource reconciles its owner by name: after the
// owner is deleted and created again, the deletion of what the earlier
// lifetime owned (the reaper's work, done by hand here) reconciles the
// new one.
func TestWithOwnedReconcilesTheCurrentOwner(t *testing.T) {
	svc := startService(t)
	var mu sync.Mutex
	var reconciled []string // the Uid of the Zip each reconcile got
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("zips", foo.ZipType).
		WithOwned(foo.BarV1Type).
		WithReconciler(reconcile.AsDecoded(func(_ context.Context, _ reconcile.Runtime, _ reconcile.Request, zip *resource.Decoded[*pbfoov1.Zip]) error {
			mu.Lock()
			defer mu.Unlock()
			reconciled = append(reconciled, zip.Resource.Id.Uid)
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)
	// waitAfter waits for a reconcile of the Zip with uid, after the
	// reconciles counted by mark. The reconciler writes nothing, so each
	// change the test makes (once the one before was reconciled) is the
	// only cause of the reconcile it waits for.
	mark := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(reconciled)
	}
	waitAfter := func(from int, uid, what string) {
		t.Helper()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, u := range reconciled[from:] {
				if u == uid {
					return true
				}
			}
			return false
		}, 10*time.Second, time.Millisecond, what)
	}

	zip := writeZip(t, svc.Client, "z")
	waitAfter(0, zip.Id.Uid, "the Zip is reconciled")
	from := mark()
	child := writeOwnedBar(t, svc.Client, "child", zip.Id)
	waitAfter(from, zip.Id.Uid, "the owned Bar's creation reconciles its owner")

	_, err := svc.Client.Delete(context.Background(), &pbresource.DeleteRequest{Id: zip.Id})
	require.NoError(t, err)
	again := writeZip(t, svc.Client, "z")
	waitAfter(from, again.Id.Uid, "the new Zip is reconciled")

	from = mark()
	_, err = svc.Client.Delete(context.Background(), &pbresource.DeleteRequest{Id: child.Id})
	require.NoError(t, err)
	waitAfter(from, again.Id.Uid, "the deletion of the earlier Zip's Bar reconciles the new Zip")
}

// WithOwned maps only resources whose owner is of the managed type, any
// GroupVersion.
func TestWithOwnedMapsOwnersOfTheManagedType(t *testing.T) {
	svc := startService(t)
	ctrl := controller.NewController("zips", foo.ZipType).
		WithOwned(foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil }))
	h := resourcetest.NewControllerHarness(t, svc.Client, ctrl)
	zip := writeZip(t, svc.Client, "z")
	qux := svc.Resource(foo.QuxType, "q").WithData(t, &pbfoov1.Qux{Note: "q"}).Write(t, svc.Client)

	reqs, err := h.Map(t, writeOwnedBar(t, svc.Client, "zips", zip.Id))
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	byName := resource.CloneID(zip.Id)
	byName.Uid = ""
	assert.True(t, resource.EqualID(byName, reqs[0].ID), "got %s", resource.IDString(reqs[0].ID))

	for name, owner := range map[string]*pbresource.ID{"quxs": qux.Id, "nobodys": nil} {
		reqs, err := h.Map(t, writeOwnedBar(t, svc.Client, name, owner))
		require.NoError(t, err)
		assert.Empty(t, reqs)
	}
}

func TestWithOwnedIsAWatch(t *testing.T) {
	svc := startService(t)
	m := newManager(t, svc.Client)
	noop := reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })
	mapper := func(context.Context, reconcile.Runtime, *pbresource.Resource) ([]reconcile.Request, error) {
		return nil, nil
	}
	for _, tc := range []struct {
		ctrl *controller.Controller
		want string
	}{
		{controller.NewController("twice", foo.ZipType).WithReconciler(noop).WithOwned(foo.BarV1Type).WithOwned(foo.BarV2Type),
			"WithOwned(foo.v2.Bar): the type is watched twice"},
		{controller.NewController("and-watched", foo.ZipType).WithReconciler(noop).WithOwned(foo.BarV1Type).WithWatch(foo.BarV1Type, mapper),
			"WithWatch(foo.v1.Bar): the type is watched twice"},
		{controller.NewController("managed", foo.ZipType).WithReconciler(noop).WithOwned(foo.ZipType),
			"WithOwned(foo.v1.Zip): the managed type is watched already"},
		{controller.NewController("no-type", foo.ZipType).WithReconciler(noop).WithOwned(nil),
			"WithOwned: "},
	} {
		err := m.Register(tc.ctrl)
		assert.ErrorContains(t, err, `controller "`+tc.ctrl.Name()+`"`)
		assert.ErrorContains(t, err, tc.want)
	}
}
