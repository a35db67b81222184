package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/host"
)

// runServer is `loom server`: a host (see package host) serving the example
// types of examples/foo and their controllers.
func runServer(ctx context.Context, args []string, _, stderr io.Writer) error {
	err := host.Run(ctx, args, stderr, registerExamples,
		host.WithName("loom server"),
		host.WithDescription("Runs a Loom server with the example types of examples/foo (foo.v1.Bar,\n"+
			"foo.v2.Bar, foo.v1.Zip, foo.v1.Qux) and their controllers.\n\n"+
			"Examples:\n"+
			"  loom server -dev\n"+
			"  loom server -storage etcd -etcd-endpoints http://127.0.0.1:2379 -tls-cert srv.pem -tls-key srv-key.pem"))
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return fmt.Errorf("server: %w", err)
	}
	return err
}

// registerExamples registers the example types and controllers.
func registerExamples(h *host.Host) error {
	if err := foo.RegisterTypes(h.Registry()); err != nil {
		return err
	}
	return foo.RegisterControllers(h.Manager())
}
