package guide

import (
	"testing"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/resourcetest"
	"github.com/stretchr/testify/require"
)

// The guide's resync controller is a valid declaration.
func TestDNSControllerRegisters(t *testing.T) {
	m, err := controller.NewManager(resourcetest.RunResourceService(t, RegisterTypes), nil)
	require.NoError(t, err)
	require.NoError(t, m.Register(dnsController()))
}
