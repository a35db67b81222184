package builtin_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/builtin"
	"github.com/loomrt/loom/server/reaper/reapertest"
	"github.com/loomrt/loom/storage/inmem"
)

func TestEmbeddedServerCascadesDeletions(t *testing.T) {
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	srv, mgr, err := builtin.New(server.Config{Backend: inmem.New(), Registry: reg}, nil)
	require.NoError(t, err)
	mgr.SetLeader(true) // one server, no lease: it leads
	reapertest.CheckEmbeddedCascades(t, srv, mgr, 30*time.Second)
}
