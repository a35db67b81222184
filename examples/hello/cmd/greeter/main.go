// Command greeter runs the greeter controller of examples/hello in a
// process of its own, against a hello server that serves the types without
// running it (package remote; docs/operations.md, "Controllers in a
// process of their own"). From examples/hello:
//
//	go run . -dev -controllers=false -grpc-addr 127.0.0.1:8503
//	go run ./cmd/greeter -addr 127.0.0.1:8503
package main

import (
	"github.com/loomrt/loom/examples/hello/greeting"
	"github.com/loomrt/loom/remote"
)

func main() {
	remote.Main(func(p *remote.Process) error {
		return greeting.RegisterControllers(p.Manager())
	}, remote.WithName("greeter"), remote.WithDescription("Greets every hello.v1.Greeting of a hello server."))
}
