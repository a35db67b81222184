package guide

import (
	"context"
	"log/slog"
	"os"

	"github.com/loomrt/loom/condition"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
)

// setReady sets the Ready condition of the Bar's status, keeping the
// conditions it does not touch, and writes the status if it changed.
func setReady(ctx context.Context, rt reconcile.Runtime, bar *pbresource.Resource, ready bool, why string) error {
	st := condition.CopyStatus(bar, "guide.bar")
	if ready {
		condition.Set(st, condition.True("Ready", "Ready", why))
	} else {
		condition.Set(st, condition.False("Ready", "NotReady", why))
	}
	_, err := rt.WriteStatus(ctx, bar, "guide.bar", st)
	return err
}

// newSlogManager returns a Manager that logs through log/slog.
func newSlogManager(client pbresource.ResourceServiceClient) (*controller.Manager, error) {
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	return controller.NewManager(client, controller.NewSlogLogger(logger))
}
