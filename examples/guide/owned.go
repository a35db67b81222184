package guide

import (
	"context"
	"errors"

	"github.com/loomrt/loom/condition"
	"github.com/loomrt/loom/controller"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/upsert"
	"google.golang.org/protobuf/types/known/anypb"
)

// zipController keeps, for every Zip, a Bar of the same name that the Zip
// owns.
func zipController() *controller.Controller {
	return controller.NewController("zip", ZipType).
		WithOwned(BarType).
		WithReconciler(reconcile.AsDecoded(reconcileZip))
}

const zipFinalizer = "guide.example/zip-cleanup"

// reconcileZip gives a Zip its Bar, and says in its status whether it has
// it.
func reconcileZip(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, zip *resource.Decoded[*pbfoov1.Zip]) error {
	if finalizer.IsMarkedForDeletion(zip.Resource) {
		// Clean up what the Zip stood for outside Loom, then let it go;
		// the reaper deletes its Bar.
		_, err := finalizer.EnsureFinalizerRemoved(ctx, rt, zip.Resource, zipFinalizer)
		return err
	}
	res, err := finalizer.EnsureHasFinalizer(ctx, rt, zip.Resource, zipFinalizer)
	if err != nil {
		return err
	}
	barID := &pbresource.ID{
		Type:    BarType,
		Tenancy: &pbresource.Tenancy{Partition: res.Id.Tenancy.GetPartition(), Namespace: "default"},
		Name:    res.Id.Name,
	}
	_, _, err = upsert.CreateOrUpdateOwned(ctx, rt.Client, res.Id, barID, func(bar *pbresource.Resource) error {
		data, err := anypb.New(&pbfoov1.Bar{Baz: "zip " + zip.Data.Zap})
		bar.Data = data
		return err
	}, upsert.ReplaceStale())
	st := condition.CopyStatus(res, "guide.zip")
	switch {
	case errors.Is(err, upsert.ErrReplacePending):
		// The Bar of an earlier Zip of this name is being deleted; its
		// deletion brings this reconciler back (WithOwned) to create ours.
		condition.Set(st, condition.False("BarReady", "ReplacingBar", err.Error()))
	case err != nil:
		return err
	default:
		condition.Set(st, condition.True("BarReady", "Ok", "the bar is up to date"))
	}
	_, err = rt.WriteStatus(ctx, res, "guide.zip", st)
	return err
}
