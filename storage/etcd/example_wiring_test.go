package etcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/builtin"
	"github.com/loomrt/loom/server/reaper/reapertest"
	loometcd "github.com/loomrt/loom/storage/etcd"
)

// connectToEtcd is the first half of the wiring docs/operations.md shows:
// the etcd client. It is compiled, so the page cannot drift from the API.
func connectToEtcd(ctx context.Context, registry resource.Registry, logger hclog.Logger) (*server.Server, *controller.Manager, error) {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"},
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, nil, err
	}
	return wireOnEtcd(ctx, client, registry, logger)
}

// wireOnEtcd is the second half: a ResourceService on the etcd backend,
// with its built-in controllers on a Manager following the etcd leader
// lease. TestDocumentedWiringCascades runs it.
func wireOnEtcd(ctx context.Context, client *clientv3.Client, registry resource.Registry, logger hclog.Logger) (*server.Server, *controller.Manager, error) {
	backend := loometcd.New(client, loometcd.WithPrefix("/loom"))

	// One Lease per server process; every server campaigns under the same
	// key, the backend's (fences name only its leader keys).
	lease, err := loometcd.NewLease(ctx, client, backend.ElectionKey(), 15*time.Second)
	if err != nil {
		return nil, nil, err
	}
	// The server comes with its built-in controllers (the reaper, which
	// carries out cascading deletion) registered on the Manager: register
	// yours on it too, and run it for as long as the server serves.
	return builtin.New(server.Config{
		Backend:  backend,
		Registry: registry,
	}, logger, controller.WithLease(lease))
}

var _ = connectToEtcd

func TestDocumentedWiringCascades(t *testing.T) {
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, mgr, err := wireOnEtcd(ctx, loometcd.SharedTestClient(), reg, nil)
	require.NoError(t, err)
	reapertest.CheckEmbeddedCascades(t, srv, mgr, 30*time.Second)
}
