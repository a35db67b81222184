// Command loom is Loom's host server and a client for the ResourceService
// of Loom's servers and Consul's (see docs/cli.md).
//
//	loom server -dev                     run a development server (in-memory storage)
//	loom server -storage etcd ...        run one of several servers sharing an etcd cluster
//	loom apply -f FILE|DIR|-             create or update the resources in YAML or JSON files
//	loom export|import                   back up and restore resources (bulk service)
//	loom read|list|delete|watch|write    use the ResourceService of a running server
//	loom history|diff|trash|restore      see and undo changes (a Loom server's history)
//	loom init -module PATH DIR           create a module with a resource type, its controller and tests
//	loom create type -kind KIND          add a resource type to it
//	loom generate FILE.proto...          compile .proto files to Go (no protoc needed)
//	loom certs [-hosts H,...]            write a CA and certificates for development and tests
//	loom leader HTTP-ADDR...             show which server leads
//	loom version                         print the version
//	loom help                            show the commands
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/host"
	"github.com/loomrt/loom/internal/daemon"
)

// version is normally empty and taken from the build information; a release
// build may set it with -ldflags "-X main.version=v1.2.3".
var version = ""

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, put the default handling back, so a
		// second Ctrl-C ends a shutdown that is taking too long.
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// usageError marks a mistake in the command line; it exits with status 2.
// It is the host's, so that `loom server`'s flag errors are usage errors too.
type usageError = host.UsageError

func usagef(format string, args ...any) error {
	return usageError{Err: fmt.Errorf(format, args...)}
}

// exitCode reports err on stderr and turns it into the process's exit status.
func exitCode(err error, stderr io.Writer) int {
	var usage usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &usage):
		msg := err.Error()
		if !strings.HasPrefix(msg, "loom ") { // a command's own, e.g. "loom list: ..."
			msg = "loom: " + msg
		}
		fmt.Fprintf(stderr, "%s\nRun 'loom help' for usage.\n", msg)
		return 2
	default:
		hinted, _ := err.(hintedError)
		if hinted.err != nil {
			err = hinted.err
		}
		if st, ok := status.FromError(err); ok {
			// A server's answer: its code and message read better than
			// the Go error's "rpc error: code = ... desc = ...".
			fmt.Fprintf(stderr, "loom: %s: %s\n", st.Code(), st.Message())
		} else {
			fmt.Fprintf(stderr, "loom: %v\n", err)
		}
		if hinted.hint != "" {
			fmt.Fprintf(stderr, "loom: hint: %s\n", hinted.hint)
		}
		return 1
	}
}

// command is one subcommand of loom.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"server", "run a Loom server (-dev in memory, or -storage etcd)", runServer},
		{"apply", "create or update the resources in YAML or JSON files", runApply},
		{"export", "print every resource of some types, at one version (a logical backup)", runExport},
		{"import", "create or update many resources at once, all checked first (restores an export)", runImport},
		{"read", "read one resource", runRead},
		{"list", "list resources of a type, or those a resource owns", runList},
		{"delete", "delete a resource, or those in files", runDelete},
		{"watch", "watch resources of a type, printing each event", runWatch},
		{"write", "write one resource as given (apply is usually better)", runWrite},
		{"history", "list the kept versions of a resource, and what each changed", runHistory},
		{"diff", "show what changed in a resource between two versions", runDiff},
		{"trash", "list the deleted resources of a type kept in the trash", runTrash},
		{"restore", "bring a deleted resource back, or roll a live one back", runRestore},
		{"types", "list the server's resource types and your access to them", runTypes},
		{"stats", "count the stored resources of each type", runStats},
		{"init", "create a Go module with a resource type, its controller and tests", runInit},
		{"create", "add a resource type to a module made by init (create type -kind KIND)", runCreate},
		{"generate", "compile .proto files to Go, with nothing installed but Go", runGenerate},
		{"certs", "write a CA and server and client certificates for development and tests", runCerts},
		{"leader", "show which server leads, from the servers' /metrics", runLeader},
		{"version", "print the version of loom", runVersion},
		{"help", "show this help", runHelp},
	}
}

// run is the whole program minus process concerns (signals, exit status):
// it parses args, runs the chosen command until it finishes or ctx ends,
// and writes only to stdout and stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		printUsage(stderr)
		return usagef("no command given")
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	case "-version", "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, rest, stdout, stderr)
		}
	}
	return usagef("unknown command %q", name)
}

func runHelp(_ context.Context, args []string, stdout, _ io.Writer) error {
	if len(args) > 0 {
		// "loom help server" is "loom server -h".
		for _, c := range commands() {
			if c.name == args[0] && c.name != "help" {
				return c.run(context.Background(), []string{"-h"}, stdout, stdout)
			}
		}
		return usagef("unknown command %q", args[0])
	}
	printUsage(stdout)
	return nil
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: loom <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nThe client commands connect to -addr (default $%s, else %s), with -token\n"+
		"(default $%s) and -tls-ca/-tls-cert/-tls-key. Exit status: 0 success, 1 the server\n"+
		"refused (its code and message are printed), 2 usage error.\n", envAddr, host.DefaultGRPCAddr, envToken)
	fmt.Fprintf(w, "\nRun 'loom help <command>' for a command's flags and examples.\n")
}

func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loom version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: loom version\n\nPrints loom's module version (\"(devel)\" for a build from a checkout), the VCS revision\nit was built from (\"unknown\" when the build did not stamp one), the Go version and the\nplatform: what the servers' loom_build_info metric says.\n\n"+
			"Examples:\n  loom version\n  loom --version\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{Err: err}
	}
	if fs.NArg() > 0 {
		return usagef("version takes no arguments")
	}
	fmt.Fprintln(stdout, versionString())
	return nil
}

// versionString is what `loom version` prints: the version (-ldflags
// main.version, else the module version from the build), the VCS revision
// and the Go version, as loom_build_info labels them.
func versionString() string {
	b := daemon.ReadBuildInfo()
	if version != "" {
		b.Version = version
	}
	return fmt.Sprintf("loom %s (revision %s, %s %s/%s)", b.Version, b.Revision, b.Go, runtime.GOOS, runtime.GOARCH)
}
