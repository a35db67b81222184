package guide

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/prometheus/client_golang/prometheus"
)

// runControllers starts the guide's controllers against any ResourceService.
func runControllers(ctx context.Context, client pbresource.ResourceServiceClient, reg *prometheus.Registry) error {
	mgr, err := controller.NewManager(client, hclog.Default(), controller.WithMetrics(reg))
	if err != nil {
		return err
	}
	if err := mgr.Register(barController()); err != nil {
		return err
	}
	if err := mgr.Register(localConfigController()); err != nil {
		return err
	}
	// A single server is its own leader; several servers use WithLease.
	mgr.SetLeader(true)
	return mgr.Run(ctx)
}
