package etcd_test

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	loometcd "github.com/loomrt/loom/storage/etcd"
)

// wireOnEtcd is the wiring docs/operations.md shows: a ResourceService on
// the etcd backend and a Manager following the etcd leader lease. It is
// compiled, so the page cannot drift from the API.
func wireOnEtcd(ctx context.Context, registry resource.Registry, logger hclog.Logger) (*controller.Manager, error) {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	backend := loometcd.New(client, loometcd.WithPrefix("/loom"))
	srv := server.New(server.Config{
		Backend:  backend,
		Registry: registry,
	})
	resourceClient := server.NewInProcessClient(srv)

	// One Lease per server process; every server campaigns under the same
	// key, the backend's (fences name only its leader keys).
	lease, err := loometcd.NewLease(ctx, client, backend.ElectionKey(), 15*time.Second)
	if err != nil {
		return nil, err
	}
	return controller.NewManager(resourceClient, logger, controller.WithLease(lease))
}

var _ = wireOnEtcd
