package etcd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// TestFenceEndToEnd runs a singleton controller under an etcd Lease whose
// member is then cut off from etcd while a reconcile is stuck (as in a
// process paused by the OS). Another member is elected. When the stuck
// reconcile finally writes, through the Manager's fenced client, the
// ResourceService and the etcd backend, the write is refused with
// FailedPrecondition and nothing lands; the new leader's writes land. The
// same holds for a write made directly on the backend with the old term's
// storage.Fence.
func TestFenceEndToEnd(t *testing.T) {
	be := newTestBackend(t)
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	svc := server.New(server.Config{Backend: be, Registry: reg})
	client := server.NewInProcessClient(svc)
	ctx := testContext(t)

	key := be.ElectionKey()
	const ttl = 2 * time.Second
	p := newProxy(t)
	leaseCtx, stopLeases := context.WithCancel(context.Background())
	defer stopLeases()
	a, err := NewLease(leaseCtx, p.client(t), key, ttl, WithLeaseValue("a"))
	require.NoError(t, err)
	waitHeld(t, a, true, 10*time.Second)
	aKey, aRev, ok := a.Fence()
	require.True(t, ok)

	// The singleton writes a status on each Bar. For "stuck" it first waits
	// for the test, ignoring its context, like a paused process would.
	release := make(chan struct{})
	stuckStarted := make(chan struct{})
	stuckResult := make(chan error, 1)
	reconciler := reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
		wctx := ctx
		if req.ID.Name == "stuck" {
			close(stuckStarted)
			<-release
			wctx = context.Background()
		}
		rsp, err := rt.Client.Read(wctx, &pbresource.ReadRequest{Id: req.ID})
		if err != nil {
			return err
		}
		_, err = rt.Client.WriteStatus(wctx, &pbresource.WriteStatusRequest{
			Id: rsp.Resource.Id, Key: "test", Status: &pbresource.Status{ObservedGeneration: rsp.Resource.Generation},
		})
		if req.ID.Name == "stuck" {
			stuckResult <- err
			return nil
		}
		return err
	})
	mgr, err := controller.NewManager(client, nil, controller.WithLease(a))
	require.NoError(t, err)
	mgr.MustRegister(controller.NewController("status", foo.BarV1Type).WithReconciler(reconciler))
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Run(mgrCtx) }()
	defer func() {
		stopMgr()
		<-mgrDone
	}()

	writeBar := func(name string) *pbresource.Resource {
		data, err := anypb.New(&pbfoov1.Bar{Baz: name})
		require.NoError(t, err)
		rsp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
			Id:   &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name},
			Data: data,
		}})
		require.NoError(t, err)
		return rsp.Resource
	}
	waitStatus := func(id *pbresource.ID) {
		require.Eventually(t, func() bool {
			rsp, err := client.Read(ctx, &pbresource.ReadRequest{Id: id})
			return err == nil && rsp.Resource.Status["test"] != nil
		}, 10*time.Second, 5*time.Millisecond, "the leader's status write on %s", id.Name)
	}

	// While a leads, its writes land.
	fine := writeBar("fine")
	waitStatus(fine.Id)
	stuck := writeBar("stuck")
	select {
	case <-stuckStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the reconcile of stuck did not start")
	}

	// a is cut off; it steps down and b is elected.
	p.setCut(true)
	waitHeld(t, a, false, 2*ttl)
	b, err := NewLease(leaseCtx, testClient, key, ttl, WithLeaseValue("b"))
	require.NoError(t, err)
	waitHeld(t, b, true, 4*ttl)
	bKey, bRev, ok := b.Fence()
	require.True(t, ok)
	require.Greater(t, bRev, aRev)

	// The stuck reconcile wakes up and writes: refused.
	close(release)
	select {
	case err := <-stuckResult:
		require.Equal(t, codes.FailedPrecondition, status.Code(err), "the deposed leader's write: %v", err)
		require.Contains(t, status.Convert(err).Message(), "write fenced: leadership has moved")
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck reconcile did not return")
	}
	rsp, err := client.Read(ctx, &pbresource.ReadRequest{Id: stuck.Id})
	require.NoError(t, err)
	require.Nil(t, rsp.Resource.Status["test"], "the fenced status write did not land")
	require.Equal(t, stuck.Version, rsp.Resource.Version)

	// Directly on the backend: the old term's fence fails with
	// storage.ErrFenced, the new term's succeeds.
	upd := resource.Clone(rsp.Resource)
	upd.Metadata = map[string]string{"k": "v"}
	_, err = be.WriteCAS(storage.WithFence(ctx, storage.Fence{Key: aKey, Revision: aRev}), upd)
	require.ErrorIs(t, err, storage.ErrFenced)
	require.ErrorIs(t, err, ErrFenced)
	require.ErrorIs(t, be.DeleteCAS(storage.WithFence(ctx, storage.Fence{Key: aKey, Revision: aRev}), upd.Id, ""), storage.ErrFenced)
	_, err = be.WriteCAS(storage.WithFence(ctx, storage.Fence{Key: bKey, Revision: bRev}), upd)
	require.NoError(t, err)
}
