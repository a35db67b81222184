package guide

import (
	"context"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/dependency"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

// ZipType is the type Bars reference.
var ZipType = &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Zip"}

// barController declares the controller.
func barController() *controller.Controller {
	return controller.NewController("bar", BarType, byZip).
		WithWatch(ZipType, dependency.MapByIndex(BarType, "by-zip")).
		WithInitializer(barInitializer{}).
		WithReconciler(reconcile.AsDecoded(reconcileBar))
}

// byZip indexes Bars by the Zip their qux field names.
var byZip = dependency.ReferenceIndex("by-zip", func(bar *pbfoov1.Bar) resource.ReferenceOrID {
	return bar.Qux
})

const barFinalizer = "guide.example/bar-cleanup"

// reconcileBar reconciles one Bar, read from the cache and decoded.
func reconcileBar(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, bar *resource.Decoded[*pbfoov1.Bar]) error {
	if finalizer.IsMarkedForDeletion(bar.Resource) {
		// Clean up whatever the Bar stood for, then let it go.
		_, err := finalizer.EnsureFinalizerRemoved(ctx, rt, bar.Resource, barFinalizer)
		return err
	}
	// Go on with the Bar as stored with the finalizer: the status below
	// then names the generation that has it.
	res, err := finalizer.EnsureHasFinalizer(ctx, rt, bar.Resource, barFinalizer)
	if err != nil {
		return err
	}
	if time.Now().Hour() < 9 && bar.Data.Baz == "wait-for-office-hours" {
		return reconcile.RequeueAfter(time.Hour)
	}
	_, err = rt.WriteStatus(ctx, res, "guide.bar", &pbresource.Status{
		Conditions: []*pbresource.Condition{{
			Type:    "Accepted",
			State:   pbresource.Condition_STATE_TRUE,
			Reason:  "Ok",
			Message: "the bar looks fine",
		}},
	})
	return err
}

type barInitializer struct{}

// Initialize makes sure a default Bar exists before the first reconcile.
func (barInitializer) Initialize(ctx context.Context, rt reconcile.Runtime) error {
	id := &pbresource.ID{Type: BarType, Name: "default"}
	_, err := rt.Client.Read(ctx, &pbresource.ReadRequest{Id: id})
	if status.Code(err) != codes.NotFound {
		return err // nil when the Bar exists: leave it as it is
	}
	data, err := anypb.New(&pbfoov1.Bar{Baz: "default"})
	if err != nil {
		return err
	}
	_, err = rt.Client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}})
	return err
}
