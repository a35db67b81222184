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

// runServer is `loom server`: a host (see package host) with only the
// built-in types, plus the example types of examples/foo and their
// controllers in -dev or with -examples.
func runServer(ctx context.Context, args []string, _, stderr io.Writer) error {
	var examples bool
	register := func(h *host.Host) error {
		if !h.Dev() && !examples {
			return nil
		}
		if err := foo.RegisterTypes(h.Registry()); err != nil {
			return err
		}
		return foo.RegisterControllers(h.Manager())
	}
	err := host.Run(ctx, args, stderr, register,
		host.WithName("loom server"),
		host.WithFlags(func(fs *flag.FlagSet) {
			fs.BoolVar(&examples, "examples", false,
				"serve the example types of examples/foo and run their controllers outside -dev too (-dev always does)")
		}),
		host.WithDescription("Runs a Loom server. With -dev (or -examples) it serves the example types of\n"+
			"examples/foo (foo.v1.Bar, foo.v2.Bar, foo.v1.Zip, foo.v1.Qux) and runs their\n"+
			"controllers; otherwise only the built-in types. To serve your own types, build\n"+
			"your own host with package host (docs/operations.md)."))
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return fmt.Errorf("server: %w", err)
	}
	return err
}
