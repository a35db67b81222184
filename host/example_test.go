package host_test

import (
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/host"
)

// A controller author's main: register the types and the controllers; the
// host does the rest. It is what docs/operations.md shows ("Running your
// own host"), with the example types standing in for yours.
func ExampleMain() {
	host.Main(func(h *host.Host) error {
		if err := foo.RegisterTypes(h.Registry()); err != nil {
			return err
		}
		return foo.RegisterControllers(h.Manager())
	}, host.WithName("my-controllers"))
}
