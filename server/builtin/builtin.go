// Package builtin makes a ResourceService server together with the
// controllers that keep its contracts. The server alone stores a Tombstone
// when an owner is deleted; the reaper (package reaper) deletes what the
// owner owned. A server made with server.New and no reaper running leaks
// every owned resource whose owner is deleted, so an embedder makes the
// server with New and runs the Manager it returns.
package builtin

import (
	"github.com/hashicorp/go-hclog"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/reaper"
)

// Controllers returns the built-in controllers, ready to Register on a
// Manager whose client reaches the server: today the reaper, which carries
// out cascading deletion.
func Controllers() []*controller.Controller {
	return []*controller.Controller{reaper.Controller()}
}

// New returns a server for cfg (see server.New) and a Manager on its
// in-process client with the built-in controllers registered; opts and
// logger configure the Manager as controller.NewManager's do. Register
// your own controllers on the Manager too, and run it for as long as the
// server serves: while it is stopped, deleting an owner leaves its owned
// resources behind until it runs again. The built-in controllers are
// singletons: they run on the leader, so give a Manager without
// controller.WithLease its leadership with SetLeader(true), as for any
// Manager. It panics where server.New does.
func New(cfg server.Config, logger hclog.Logger, opts ...controller.ManagerOption) (*server.Server, *controller.Manager, error) {
	srv := server.New(cfg)
	mgr, err := controller.NewManager(server.NewInProcessClient(srv), logger, opts...)
	if err != nil {
		return nil, nil, err
	}
	for _, c := range Controllers() {
		if err := mgr.Register(c); err != nil {
			return nil, nil, err
		}
	}
	return srv, mgr, nil
}
