package foo

import (
	"context"
	"fmt"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/dependency"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
)

const (
	// BarControllerName is the name of the Bar controller.
	BarControllerName = "bar"

	// StatusKey is the status key the Bar controller writes.
	StatusKey = "foo.bar"

	// BarFinalizer is the finalizer the Bar controller keeps on every Bar
	// until the Bar is deleted.
	BarFinalizer = "foo.bar/cleanup"

	// ReferableKey is the metadata key by which a Zip lets Bars see it: a
	// Bar's status says whether the Zip it names exists only for a Zip
	// whose metadata holds ReferableKey: "true". Whoever may write a Bar
	// learns that Zip's existence from the Bar's status, and the Zip's
	// writer chose that; of any other Zip the status says the same as of
	// a Zip that does not exist.
	ReferableKey = "foo.bar/referable"

	// QuxIndex indexes Bars by the Zip their qux field names (cache.Key of
	// the reference, with its tenancy defaulted).
	QuxIndex = "qux"

	// Condition types and reasons of the Bar status.
	ConditionAccepted     = "Accepted"
	ConditionResolvedRefs = "ResolvedRefs"
	ReasonOk              = "Ok"
	ReasonInvalidData     = "InvalidData"
	ReasonMissingRef      = "MissingReference"
)

// quxIndex finds Bars by the Zip they reference. A foo.v2.Bar references
// nothing, and the cache leaves it out of the index.
var quxIndex = cache.NewDecodedIndex(QuxIndex, func(_ *pbresource.Resource, bar *pbfoov1.Bar) (string, bool, error) {
	if bar.Qux == nil {
		return "", false, nil
	}
	return cache.Key(zipRef(bar.Qux)), true, nil
})

// BarController returns the controller that manages foo.v1.Bar (and Bars
// stored as foo.v2.Bar). For every Bar it:
//
//   - keeps the BarFinalizer, and removes it once the Bar is marked for
//     deletion, so the deletion completes;
//   - writes status StatusKey with condition Accepted (TRUE, reason Ok, when
//     the data is readable) and ResolvedRefs (TRUE when qux is unset or names
//     an existing foo.v1.Zip that is referable, see ReferableKey; FALSE with
//     reason MissingReference otherwise, the same whether the Zip does not
//     exist or is not referable);
//   - re-reconciles the Bars that reference a Zip when that Zip appears or
//     goes, found through the qux cache index.
//
// It writes only when something changed, so it settles.
func BarController() *controller.Controller {
	return controller.NewController(BarControllerName, BarV1Type, quxIndex).
		WithWatch(ZipType, dependency.MapByIndex(BarV1Type, QuxIndex)).
		WithReconciler(reconcile.AsDecoded(reconcileBar, reconcile.OnUndecodable(reconcileOtherBar)))
}

// RegisterControllers adds the example controllers to m.
func RegisterControllers(m *controller.Manager) error {
	return m.Register(BarController())
}

// reconcileBar reconciles a Bar read from the cache as a foo.v1.Bar.
func reconcileBar(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, bar *resource.Decoded[*pbfoov1.Bar]) error {
	if done, err := keepFinalizer(ctx, rt, bar.Resource); done {
		return err
	}
	_, err := rt.WriteStatus(ctx, bar.Resource, StatusKey, &pbresource.Status{Conditions: []*pbresource.Condition{
		{Type: ConditionAccepted, State: pbresource.Condition_STATE_TRUE, Reason: ReasonOk, Message: "the bar is valid"},
		resolvedRefs(rt, bar.Data),
	}})
	return err
}

// reconcileOtherBar reconciles a Bar whose data is not a foo.v1.Bar: one
// stored as a foo.v2.Bar is read as that and converted, anything else is
// reported as invalid.
func reconcileOtherBar(ctx context.Context, rt reconcile.Runtime, req reconcile.Request, res *pbresource.Resource, decodeErr error) error {
	v2, err := cache.GetDecodedByID[*pbfoov2.Bar](rt.Cache, req.ID)
	if err == nil {
		if v2 == nil {
			return nil // gone meanwhile
		}
		return reconcileBar(ctx, rt, req, &resource.Decoded[*pbfoov1.Bar]{Resource: v2.Resource, Data: &pbfoov1.Bar{Baz: v2.Data.Baz}})
	}
	if done, err := keepFinalizer(ctx, rt, res); done {
		return err
	}
	_, err = rt.WriteStatus(ctx, res, StatusKey, &pbresource.Status{Conditions: []*pbresource.Condition{{
		Type: ConditionAccepted, State: pbresource.Condition_STATE_FALSE,
		Reason: ReasonInvalidData, Message: decodeErr.Error(),
	}}})
	return err
}

// keepFinalizer keeps the BarFinalizer on a live Bar and removes it from a
// Bar marked for deletion; done says that it wrote (or failed to), and the
// reconcile ends there.
func keepFinalizer(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource) (done bool, err error) {
	if finalizer.IsMarkedForDeletion(res) {
		// Clean-up would happen here; then let the deletion complete.
		_, err := finalizer.EnsureFinalizerRemoved(ctx, rt, res, BarFinalizer)
		return true, err
	}
	if !finalizer.HasFinalizer(res, BarFinalizer) {
		// The write's own watch event brings the Bar back, with the
		// finalizer, and the status is written on that pass, against the
		// new generation. (Going on here with the Bar EnsureHasFinalizer
		// returns, as the guide's reconciler does, also names the current
		// generation, but the pass that event triggers may still read the
		// Bar without that status from the cache and write it again.)
		_, err := finalizer.EnsureHasFinalizer(ctx, rt, res, BarFinalizer)
		return true, err
	}
	return false, nil
}

// resolvedRefs reports whether the Zip that bar references exists and
// lets Bars see it. The controller may read every Zip, but the Bar's writer
// may not: a status that told which Zips exist would tell that writer what
// it cannot read (a confused deputy). So a Zip that does not let Bars see
// it is reported exactly as one that does not exist.
func resolvedRefs(rt reconcile.Runtime, bar *pbfoov1.Bar) *pbresource.Condition {
	if bar.Qux == nil {
		return &pbresource.Condition{Type: ConditionResolvedRefs, State: pbresource.Condition_STATE_TRUE, Reason: ReasonOk, Message: "the bar references nothing"}
	}
	ref := zipRef(bar.Qux)
	missing := &pbresource.Condition{
		Type: ConditionResolvedRefs, State: pbresource.Condition_STATE_FALSE, Reason: ReasonMissingRef,
		Resource: resource.Reference(ref, ""),
	}
	if !resource.EqualUnversionedType(ref.Type, ZipType) {
		missing.Message = fmt.Sprintf("qux must name a %s, not a %s", resource.TypeString(ZipType), resource.TypeString(ref.Type))
		return missing
	}
	zip, err := rt.Cache.GetByID(ref)
	if err != nil || zip == nil || zip.Metadata[ReferableKey] != "true" {
		missing.Message = fmt.Sprintf("zip %q does not exist, or is not referable (metadata %s: \"true\")", ref.Name, ReferableKey)
		return missing
	}
	return &pbresource.Condition{
		Type: ConditionResolvedRefs, State: pbresource.Condition_STATE_TRUE, Reason: ReasonOk,
		Message: "the referenced zip exists", Resource: resource.Reference(ref, ""),
	}
}

// zipRef returns qux with its tenancy completed the way the service stores
// a Zip (partition-scoped: partition defaults to "default", no namespace),
// so it matches the Zip's ID in the cache. The input is not changed.
func zipRef(qux *pbresource.ID) *pbresource.ID {
	ref := resource.CloneID(qux)
	if ref.Type == nil {
		ref.Type = ZipType
	}
	partition := qux.GetTenancy().GetPartition()
	if partition == "" {
		partition = resource.DefaultPartition
	}
	ref.Tenancy = &pbresource.Tenancy{Partition: partition}
	return ref
}
