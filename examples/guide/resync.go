package guide

import (
	"context"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/reconcile"
)

// dnsController keeps a record outside the resource API in step with each
// Bar; someone may change that record by hand, so it checks every Bar again
// every ten minutes.
func dnsController() *controller.Controller {
	return controller.NewController("bar-dns", BarType).
		WithResync(10 * time.Minute).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			rt.Logger.Debug("checking the DNS record", "name", req.ID.Name)
			return nil
		}))
}
