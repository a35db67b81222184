package controller

import (
	"context"
	"testing"

	"github.com/loomrt/loom/predicate"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/assert"
)

func TestWithEventFilterValidation(t *testing.T) {
	managed := &pbresource.Type{Group: "test", GroupVersion: "v1", Kind: "Managed"}
	watched := &pbresource.Type{Group: "test", GroupVersion: "v1", Kind: "Watched"}
	other := &pbresource.Type{Group: "test", GroupVersion: "v1", Kind: "Other"}
	noop := reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })
	mapper := func(context.Context, reconcile.Runtime, *pbresource.Resource) ([]reconcile.Request, error) {
		return nil, nil
	}
	build := func() *Controller {
		return NewController("c", managed).WithReconciler(noop).WithWatch(watched, mapper)
	}

	assert.NoError(t, build().
		WithEventFilter(managed, predicate.IgnoreOwnStatus("c")).
		WithEventFilter(&pbresource.Type{Group: "test", GroupVersion: "v2", Kind: "Watched"}, predicate.GenerationChanged()).
		validate(), "any version of a watched type")
	assert.ErrorContains(t, build().WithEventFilter(other, predicate.GenerationChanged()).validate(),
		"WithEventFilter(test.v1.Other): not the managed type nor a watched one")
	assert.ErrorContains(t, build().WithEventFilter(managed, nil).validate(), "nil predicate")
}
