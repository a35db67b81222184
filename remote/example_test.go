package remote_test

import (
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/remote"
)

// The main of a controller process that runs the example controllers
// against a host serving their types (started with -controllers=false):
// what docs/operations.md shows ("Controllers in a process of their own"),
// with the example controllers standing in for yours.
func ExampleMain() {
	remote.Main(func(p *remote.Process) error {
		return foo.RegisterControllers(p.Manager())
	}, remote.WithName("my-controllers"))
}
