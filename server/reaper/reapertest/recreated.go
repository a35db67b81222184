package reapertest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/upsert"
)

// What the owner controller of RunRecreatedOwner writes.
const (
	ownerFinalizer = "reapertest/owner-cleanup"
	ownerStatus    = "reapertest.owner"
	childReady     = "ChildReady"
	// childHold is the finalizer the test puts on a child, standing for
	// the child's own controller.
	childHold = "reapertest/child-hold"
)

// ownerController manages Zips the way the guide's controllers do: a
// finalizer on the Zip, an owned Bar of the same name made with
// upsert.CreateOrUpdateOwned (with opts), and a status saying whether the
// Zip has its Bar, naming the Bar's Uid. It counts its reconciles in
// reconciles.
func ownerController(reconciles *atomic.Int64, opts ...upsert.Option) *controller.Controller {
	return controller.NewController("reapertest-owner", foo.ZipType).
		WithOwned(foo.BarV1Type).
		WithBackoff(time.Millisecond, 20*time.Millisecond).
		WithReconciler(reconcile.AsDecoded(func(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, zip *resource.Decoded[*pbfoov1.Zip]) error {
			reconciles.Add(1)
			if finalizer.IsMarkedForDeletion(zip.Resource) {
				_, err := finalizer.EnsureFinalizerRemoved(ctx, rt, zip.Resource, ownerFinalizer)
				return err
			}
			res, err := finalizer.EnsureHasFinalizer(ctx, rt, zip.Resource, ownerFinalizer)
			if err != nil {
				return err
			}
			child, _, err := upsert.CreateOrUpdateOwned(ctx, rt.Client, res.Id, childID(res.Id), func(bar *pbresource.Resource) error {
				data, err := anypb.New(&pbfoov1.Bar{Baz: zip.Data.Zap})
				bar.Data = data
				return err
			}, opts...)
			cond := &pbresource.Condition{Type: childReady, State: pbresource.Condition_STATE_TRUE, Reason: "Created", Message: child.GetId().GetUid()}
			var owned *upsert.AlreadyOwnedError
			switch {
			case errors.Is(err, upsert.ErrReplacePending):
				cond = &pbresource.Condition{Type: childReady, State: pbresource.Condition_STATE_FALSE, Reason: "Replacing", Message: err.Error()}
			case errors.As(err, &owned) && owned.Stale():
				cond = &pbresource.Condition{Type: childReady, State: pbresource.Condition_STATE_FALSE, Reason: "WaitingForReaper", Message: err.Error()}
			case err != nil:
				return err
			}
			_, err = rt.WriteStatus(ctx, res, ownerStatus, &pbresource.Status{Conditions: []*pbresource.Condition{cond}})
			return err
		}))
}

// childID names the Bar a Zip owns.
func childID(zip *pbresource.ID) *pbresource.ID {
	return &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: zip.Tenancy.GetPartition(), Namespace: "default"}, Name: zip.Name}
}

// RunRecreatedOwner serves b (empty) with the example types and checks,
// with the reaper held back, that an owner deleted and created again under
// the same name ends up with a child of its own, made by a controller in
// the guide's style (finalizer, owned child through
// upsert.CreateOrUpdateOwned and Controller.WithOwned, status):
//
//   - waiting for the reaper: until the reaper removes the earlier
//     lifetime's child, the new owner's status says it has no child; once
//     the reaper is let go, the child's deletion reconciles the new owner
//     (by name), which creates its own child;
//   - with upsert.ReplaceStale, on a child its finalizer holds: the
//     controller deletes the earlier child, says so in the status, and
//     creates its own once the finalizer goes, before the reaper runs.
//
// Either way, once the reaper has run, the new owner's child is still
// there and no tombstone is left.
func RunRecreatedOwner(t *testing.T, b storage.Backend) {
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	client := resourcetest.NewClient(server.NewInProcessClient(server.New(server.Config{Backend: b, Registry: reg}))).
		WithTimeout(20 * time.Second)

	t.Run("waiting for the reaper", func(t *testing.T) {
		var reconciles atomic.Int64
		resourcetest.RunControllers(t, client, ownerController(&reconciles))
		first, oldChild := createOwner(t, client, "order-1")
		owner := recreateOwner(t, client, first)
		waitForStatus(t, client, owner, pbresource.Condition_STATE_FALSE, "WaitingForReaper")
		requireChild(t, client, owner, oldChild.Id.Uid, first.Id.Uid)
		waitQuiet(t, &reconciles)

		RunReaper(t, client)
		child := waitForOwnChild(t, client, owner)
		assert.NotEqual(t, oldChild.Id.Uid, child.Id.Uid)
		requireReaped(t, client, owner, child)
	})

	t.Run("replacing a child held by a finalizer", func(t *testing.T) {
		var reconciles atomic.Int64
		resourcetest.RunControllers(t, client, ownerController(&reconciles, upsert.ReplaceStale()))
		first, oldChild := createOwner(t, client, "order-2")
		_, _, err := upsert.CreateOrUpdate(context.Background(), client, oldChild.Id, func(res *pbresource.Resource) error {
			finalizer.AddFinalizer(res, childHold)
			return nil
		})
		require.NoError(t, err)
		owner := recreateOwner(t, client, first)
		waitForStatus(t, client, owner, pbresource.Condition_STATE_FALSE, "Replacing")
		marked := requireChild(t, client, owner, oldChild.Id.Uid, first.Id.Uid)
		require.True(t, resource.IsMarkedForDeletion(marked), "the controller deleted the earlier child")
		waitQuiet(t, &reconciles)

		// The child's controller lets it go; the reaper still waits.
		_, _, err = upsert.CreateOrUpdate(context.Background(), client, oldChild.Id, func(res *pbresource.Resource) error {
			finalizer.RemoveFinalizer(res, childHold)
			return nil
		})
		require.NoError(t, err)
		child := waitForOwnChild(t, client, owner)
		assert.NotEqual(t, oldChild.Id.Uid, child.Id.Uid)

		RunReaper(t, client)
		requireReaped(t, client, owner, child)
	})
}

// quietFor is how long the owner controller must not reconcile for
// waitQuiet to call it settled: many times its reaction time.
const quietFor = 300 * time.Millisecond

// waitQuiet waits until the owner controller has not reconciled for
// quietFor: it has settled, with nothing queued, so only a change the test
// makes next can reconcile the owner again (the test then checks that the
// change does). Its own status writes reconcile it once more (or more,
// when it reads its cache before the cache has its last write), hence the
// wait. It gives up after a minute.
func waitQuiet(t *testing.T, reconciles *atomic.Int64) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last, since := reconciles.Load(), time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		now := time.Now()
		if n := reconciles.Load(); n != last {
			last, since = n, now
		}
		if now.Sub(since) >= quietFor {
			return
		}
		if now.After(deadline) {
			require.Failf(t, "the owner controller did not settle", "still reconciling after a minute (%d reconciles)", last)
		}
	}
}

// createOwner writes a Zip and waits for its controller to give it a child.
func createOwner(t *testing.T, client *resourcetest.Client, name string) (owner, child *pbresource.Resource) {
	t.Helper()
	owner = resourcetest.Resource(foo.ZipType, name).WithData(t, &pbfoov1.Zip{Zap: name}).Write(t, client)
	return owner, waitForOwnChild(t, client, owner)
}

// recreateOwner deletes owner, waits until its controller has let it go,
// and writes it again: a new lifetime of the name, whose earlier child the
// reaper, held back, has not removed.
func recreateOwner(t *testing.T, client *resourcetest.Client, owner *pbresource.Resource) *pbresource.Resource {
	t.Helper()
	client.MustDelete(t, owner.Id)
	client.WaitForDeletion(t, owner.Id)
	again := resourcetest.Resource(foo.ZipType, owner.Id.Name).WithData(t, &pbfoov1.Zip{Zap: owner.Id.Name}).Write(t, client)
	require.NotEqual(t, owner.Id.Uid, again.Id.Uid)
	return again
}

// waitForStatus waits until the controller has reported on owner's current
// generation, and requires the report to be state, for reason.
func waitForStatus(t *testing.T, client *resourcetest.Client, owner *pbresource.Resource, state pbresource.Condition_State, reason string) *pbresource.Resource {
	t.Helper()
	res := client.WaitForResourceState(t, owner.Id, func(t resourcetest.T, res *pbresource.Resource) {
		st := res.Status[ownerStatus]
		require.NotNil(t, st, "no status yet")
		require.Equal(t, res.Generation, st.ObservedGeneration, "no status for the current generation yet")
	})
	cond := res.Status[ownerStatus].Conditions[0]
	require.Equal(t, state.String(), cond.State.String(), "the owner's status: %v", cond)
	require.Equal(t, reason, cond.Reason, "the owner's status: %v", cond)
	return res
}

// requireChild requires owner's child to be the one with uid, owned by the
// owner's lifetime ownerUid, and returns it.
func requireChild(t *testing.T, client *resourcetest.Client, owner *pbresource.Resource, uid, ownerUid string) *pbresource.Resource {
	t.Helper()
	child := client.RequireResourceExists(t, childID(owner.Id))
	require.Equal(t, uid, child.Id.Uid)
	require.Equal(t, ownerUid, child.Owner.GetUid())
	return child
}

// waitForOwnChild waits until owner's lifetime owns its child and its
// status says the child is there, naming it.
func waitForOwnChild(t *testing.T, client *resourcetest.Client, owner *pbresource.Resource) *pbresource.Resource {
	t.Helper()
	var child *pbresource.Resource
	client.WaitForResourceState(t, owner.Id, func(t resourcetest.T, res *pbresource.Resource) {
		require.Equal(t, owner.Id.Uid, res.Id.Uid, "the owner was replaced")
		cond := res.Status[ownerStatus].GetConditions()
		require.Len(t, cond, 1, "no status yet")
		require.Equal(t, pbresource.Condition_STATE_TRUE.String(), cond[0].State.String(), "the status says: %v", cond[0])
		rsp, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: childID(owner.Id)})
		require.NoError(t, err)
		require.Equal(t, owner.Id.Uid, rsp.Resource.Owner.GetUid(), "the child is not the owner's")
		require.Equal(t, rsp.Resource.Id.Uid, cond[0].Message, "the status names another child")
		child = rsp.Resource
	})
	return child
}

// requireReaped waits for the reaper to finish (no tombstone left) and
// requires owner's child to have survived it.
func requireReaped(t *testing.T, client *resourcetest.Client, owner, child *pbresource.Resource) {
	t.Helper()
	client.WaitForList(t, resource.TypeV1Tombstone, func(t resourcetest.T, tombs []*pbresource.Resource) {
		require.Empty(t, tombs, "tombstones left")
	})
	requireChild(t, client, owner, child.Id.Uid, owner.Id.Uid)
	waitForOwnChild(t, client, owner)
}
