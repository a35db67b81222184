// Command hello is an example of a complete Loom host for a controller
// author's own types: it serves hello.v1.Greeting (its own proto package,
// pbhello/v1) over the ResourceService and runs the greeter controller,
// which answers every Greeting with a status saying hello (package
// greeting). Everything else (flags, storage in memory or on etcd, leader
// election, TLS, ACLs, metrics, shutdown) is package host's:
//
//	go run . -dev -grpc-addr 127.0.0.1:8503
//	go run . -storage etcd -etcd-endpoints 127.0.0.1:2379
//
// With -controllers=false it serves the type only, and the greeter runs in
// a process of its own, cmd/greeter (package remote):
//
//	go run . -dev -controllers=false -grpc-addr 127.0.0.1:8503
//	go run ./cmd/greeter -addr 127.0.0.1:8503
//
// It is its own module, depending on Loom's root and host modules (and,
// through host, storage/etcd) as any user's module would; see
// docs/operations.md, "Your own host", and this directory's Makefile for
// generating the Go types.
package main

import (
	"github.com/loomrt/loom/examples/hello/greeting"
	"github.com/loomrt/loom/host"
)

func main() {
	host.Main(register, host.WithName("hello"),
		host.WithDescription("Greets every hello.v1.Greeting: an example of a Loom host for your own types."))
}

// register hands the host the example's types and controller.
func register(h *host.Host) error {
	if err := greeting.RegisterTypes(h.Registry()); err != nil {
		return err
	}
	return greeting.RegisterControllers(h.Manager())
}
