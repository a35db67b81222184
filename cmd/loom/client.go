package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/host"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"

	// Linked in so the example types' data can be printed as JSON.
	_ "github.com/loomrt/loom/examples/foo"
)

// The client commands talk to a running server over plaintext gRPC, like
// grpcurl -plaintext. Data messages are printed and parsed as JSON with the
// types compiled into loom (for now: the example types).

// clientFlags are the flags every client command shares.
type clientFlags struct {
	fs        *flag.FlagSet
	addr      string
	timeout   time.Duration
	partition string
	namespace string
}

func newClientFlags(name, args, summary string, output io.Writer, tenancy bool) *clientFlags {
	c := &clientFlags{fs: flag.NewFlagSet("loom "+name, flag.ContinueOnError)}
	c.fs.SetOutput(output)
	c.fs.Usage = func() {
		fmt.Fprintf(output, "Usage: loom %s [flags] %s\n\n%s\n\nFlags:\n", name, args, summary)
		c.fs.PrintDefaults()
	}
	c.fs.StringVar(&c.addr, "addr", host.DefaultGRPCAddr, "`address` of the server's gRPC port")
	c.fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up on a request after this long")
	if tenancy {
		c.fs.StringVar(&c.partition, "partition", "", "tenancy partition (empty: the type's default)")
		c.fs.StringVar(&c.namespace, "namespace", "", "tenancy namespace (empty: the type's default)")
	}
	return c
}

// parse parses args and checks that exactly nargs positional arguments remain.
func (c *clientFlags) parse(args []string, nargs int) error {
	if err := c.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{Err: err}
	}
	if c.fs.NArg() != nargs {
		c.fs.Usage()
		return usagef("%s: want %d argument(s), got %d", c.fs.Name(), nargs, c.fs.NArg())
	}
	return nil
}

func (c *clientFlags) tenancy() *pbresource.Tenancy {
	return &pbresource.Tenancy{Partition: c.partition, Namespace: c.namespace}
}

func (c *clientFlags) id(typeArg, name string) (*pbresource.ID, error) {
	typ, err := resource.ParseType(typeArg)
	if err != nil {
		return nil, usageError{Err: err}
	}
	return &pbresource.ID{Type: typ, Tenancy: c.tenancy(), Name: name}, nil
}

func (c *clientFlags) dial() (pbresource.ResourceServiceClient, func(), error) {
	conn, err := grpc.NewClient(c.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return pbresource.NewResourceServiceClient(conn), func() { conn.Close() }, nil
}

// call dials the server and runs f with a client and a context bounded by
// -timeout, closing the connection afterwards.
func (c *clientFlags) call(ctx context.Context, f func(context.Context, pbresource.ResourceServiceClient) error) error {
	client, closeConn, err := c.dial()
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return f(ctx, client)
}

// printJSON writes m as JSON: indented, or on one line when compact.
// protojson varies its whitespace on purpose (so nobody relies on it); the
// output is re-formatted with encoding/json to keep it tidy and stable.
func printJSON(w io.Writer, m proto.Message, compact bool) error {
	// Resolver finds Loom's own types (a tombstone's data) and the global ones.
	b, err := protojson.MarshalOptions{Resolver: pbresource.Resolver}.Marshal(m)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if compact {
		err = json.Compact(&out, b)
	} else {
		err = json.Indent(&out, b, "", "  ")
	}
	if err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

func runRead(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags("read", "TYPE NAME", "Reads one resource; TYPE is group.version.kind, e.g. foo.v1.Bar.", stderr, true)
	consistent := c.fs.Bool("consistent", false, "ask for a strongly consistent read")
	if err := c.parse(args, 2); err != nil {
		return err
	}
	id, err := c.id(c.fs.Arg(0), c.fs.Arg(1))
	if err != nil {
		return err
	}
	return c.call(ctx, func(ctx context.Context, client pbresource.ResourceServiceClient) error {
		if *consistent {
			ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
		}
		resp, err := client.Read(ctx, &pbresource.ReadRequest{Id: id})
		if err != nil {
			return err
		}
		return printJSON(stdout, resp.Resource, false)
	})
}

func runList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags("list", "TYPE", "Lists resources of a type; \"*\" as -partition or -namespace matches every unit.", stderr, true)
	prefix := c.fs.String("prefix", "", "only names starting with this")
	if err := c.parse(args, 1); err != nil {
		return err
	}
	typ, err := resource.ParseType(c.fs.Arg(0))
	if err != nil {
		return usageError{Err: err}
	}
	return c.call(ctx, func(ctx context.Context, client pbresource.ResourceServiceClient) error {
		resp, err := client.List(ctx, &pbresource.ListRequest{Type: typ, Tenancy: c.tenancy(), NamePrefix: *prefix})
		if err != nil {
			return err
		}
		return printJSON(stdout, resp, false)
	})
}

func runWrite(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags("write", "FILE",
		"Writes the resource in FILE (\"-\" for standard input), given as JSON either as a\n"+
			"Resource ({\"id\": ..., \"data\": ...}) or as a WriteRequest ({\"resource\": ...}),\n"+
			"and prints the stored resource.", stderr, false)
	if err := c.parse(args, 1); err != nil {
		return err
	}
	var in []byte
	var err error
	if name := c.fs.Arg(0); name == "-" {
		in, err = io.ReadAll(os.Stdin)
	} else {
		in, err = os.ReadFile(name)
	}
	if err != nil {
		return err
	}
	res, err := parseResourceJSON(in)
	if err != nil {
		return err
	}
	return c.call(ctx, func(ctx context.Context, client pbresource.ResourceServiceClient) error {
		resp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: res})
		if err != nil {
			return err
		}
		return printJSON(stdout, resp.Resource, false)
	})
}

// parseResourceJSON accepts a WriteRequest or a bare Resource.
func parseResourceJSON(in []byte) (*pbresource.Resource, error) {
	opts := protojson.UnmarshalOptions{Resolver: pbresource.Resolver}
	var req pbresource.WriteRequest
	if err := opts.Unmarshal(in, &req); err == nil && req.Resource != nil {
		return req.Resource, nil
	}
	var res pbresource.Resource
	if err := opts.Unmarshal(in, &res); err != nil {
		return nil, fmt.Errorf("parsing the resource: %w", err)
	}
	return &res, nil
}

func runDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags("delete", "TYPE NAME", "Deletes one resource (deleting one that does not exist succeeds).", stderr, true)
	version := c.fs.String("version", "", "delete only if the stored version is this one")
	if err := c.parse(args, 2); err != nil {
		return err
	}
	id, err := c.id(c.fs.Arg(0), c.fs.Arg(1))
	if err != nil {
		return err
	}
	return c.call(ctx, func(ctx context.Context, client pbresource.ResourceServiceClient) error {
		_, err := client.Delete(ctx, &pbresource.DeleteRequest{Id: id, Version: *version})
		return err
	})
}

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags("watch", "TYPE",
		"Watches resources of a type and prints one JSON event per line: first the current\n"+
			"resources, then an endOfSnapshot event, then changes as they happen, until\n"+
			"interrupted.", stderr, true)
	prefix := c.fs.String("prefix", "", "only names starting with this")
	if err := c.parse(args, 1); err != nil {
		return err
	}
	typ, err := resource.ParseType(c.fs.Arg(0))
	if err != nil {
		return usageError{Err: err}
	}
	client, closeConn, err := c.dial()
	if err != nil {
		return err
	}
	defer closeConn()
	stream, err := client.WatchList(ctx, &pbresource.WatchListRequest{Type: typ, Tenancy: c.tenancy(), NamePrefix: *prefix})
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: the normal way to stop watching
			}
			return err
		}
		if err := printJSON(stdout, ev, true); err != nil {
			return err
		}
	}
}
