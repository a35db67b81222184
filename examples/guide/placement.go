package guide

import (
	"context"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/reconcile"
)

// localConfigController runs on every server, leader or not, to apply each
// Bar to the server's local configuration.
func localConfigController() *controller.Controller {
	return controller.NewController("bar-local-config", BarType).
		WithPlacement(controller.PlacementEachServer).
		WithConcurrency(4).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			rt.Logger.Debug("applying bar locally", "name", req.ID.Name)
			return nil
		}))
}
