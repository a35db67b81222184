package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/dial"
	"github.com/loomrt/loom/host"
	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	"github.com/loomrt/loom/proto/pbresource"
)

// defaultTimeout bounds each request unless -timeout says otherwise.
const defaultTimeout = 10 * time.Second

// Environment variables the connection flags default to.
const (
	envAddr  = "LOOM_ADDR"
	envToken = "LOOM_TOKEN"
)

// commandHelp describes one client command for its usage text.
type commandHelp struct {
	name    string // e.g. "read"
	args    string // e.g. "TYPE NAME"
	summary string // what the command does, one or more lines
	example string // one or more example invocations, one per line
}

// clientFlags are the flags every client command shares: the connection
// (address, token, TLS, -protoset), -timeout, and the tenancy when the
// command takes one.
type clientFlags struct {
	fs      *flag.FlagSet
	help    commandHelp
	addr    string
	token   string
	tlsCA   string
	tlsCert string
	tlsKey  string
	timeout time.Duration
	// perRequest is how long each request may take: -timeout, except for
	// watch, whose -timeout is how long to watch.
	perRequest func() time.Duration

	protoset  string
	partition string
	namespace string

	args []string // the positional arguments, once parsed

	// sess is the command's connection once made (session); call closes
	// it.
	sess *session
}

func newClientFlags(h commandHelp, output io.Writer, tenancy bool) *clientFlags {
	c := &clientFlags{fs: flag.NewFlagSet("loom "+h.name, flag.ContinueOnError), help: h}
	c.perRequest = func() time.Duration { return c.timeout }
	c.fs.SetOutput(output)
	c.fs.Usage = func() { c.usage(output) }
	addr := os.Getenv(envAddr)
	if addr == "" {
		addr = host.DefaultGRPCAddr
	}
	c.fs.StringVar(&c.addr, "addr", addr, "`addresses` of the servers' gRPC ports, separated by commas: requests fail over between them ($"+envAddr+" sets the default)")
	// The token's default is not shown in the help, which would print the
	// secret: an empty flag means $LOOM_TOKEN, read in connect.
	c.fs.StringVar(&c.token, "token", "", "ACL `token` sent with every request (default $"+envToken+")")
	c.fs.StringVar(&c.tlsCA, "tls-ca", "", "`file` of PEM CA certificates the server's certificate is verified against (turns TLS on; the system's roots when only -tls-cert is given)")
	c.fs.StringVar(&c.tlsCert, "tls-cert", "", "`file` of the PEM client certificate to present (mutual TLS, with -tls-key; turns TLS on)")
	c.fs.StringVar(&c.tlsKey, "tls-key", "", "`file` of the PEM private key of -tls-cert")
	c.fs.StringVar(&c.protoset, "protoset", "", "`file` holding a FileDescriptorSet (protoc --include_imports --descriptor_set_out) of the data types, for servers without gRPC reflection")
	c.fs.DurationVar(&c.timeout, "timeout", defaultTimeout, "give up on each request after this long")
	if tenancy {
		c.fs.StringVar(&c.partition, "partition", "", "tenancy partition (empty: the type's default)")
		c.fs.StringVar(&c.namespace, "namespace", "", "tenancy namespace (empty: the type's default)")
	}
	return c
}

func (c *clientFlags) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: loom %s [flags] %s\n\n%s\n", c.help.name, c.help.args, c.help.summary)
	if c.help.example != "" {
		fmt.Fprintf(w, "\nExamples:\n")
		for _, line := range strings.Split(strings.TrimSpace(c.help.example), "\n") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
	fmt.Fprintf(w, "\nFlags may come before or after the arguments (\"--\" ends the flags).\n\nFlags:\n")
	c.fs.PrintDefaults()
}

// parse parses args, flags and arguments in any order, and checks that
// between min and max positional arguments remain (max < 0: no limit).
func (c *clientFlags) parse(args []string, min, max int) error {
	positional, err := parseInterspersed(c.fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{Err: err}
	}
	if len(positional) < min || (max >= 0 && len(positional) > max) {
		want := fmt.Sprintf("%d", min)
		switch {
		case max < 0:
			want = fmt.Sprintf("at least %d", min)
		case max != min:
			want = fmt.Sprintf("%d to %d", min, max)
		}
		return usagef("%s: want %s argument(s) (%s), got %d", c.fs.Name(), want, c.help.args, len(positional))
	}
	c.args = positional
	return nil
}

// parseInterspersed parses fs from args, letting flags follow positional
// arguments as kubectl does ("loom list foo.v1.Bar -namespace '*'"), and
// returns the positional arguments. "--" ends the flags; a lone "-" is an
// argument (standard input).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// The flag package stops at the first non-flag argument, or after
		// "--", which it consumes: tell the two apart by what preceded.
		consumed := args[:len(args)-len(rest)]
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func (c *clientFlags) tenancy() *pbresource.Tenancy {
	return &pbresource.Tenancy{Partition: c.partition, Namespace: c.namespace}
}

// id returns the ID of the resource named name of the type typeArg names
// (typeOf), in the tenancy of the flags.
func (c *clientFlags) id(ctx context.Context, stderr io.Writer, typeArg, name string) (*pbresource.ID, error) {
	typ, err := c.typeOf(ctx, stderr, typeArg)
	if err != nil {
		return nil, err
	}
	return &pbresource.ID{Type: typ, Tenancy: c.tenancy(), Name: name}, nil
}

// session is one command's connection to the server and the message types
// it resolves through it.
type session struct {
	conn   *grpc.ClientConn
	client pbresource.ResourceServiceClient
	// bulk is Loom's bulk service on the same connection; nil for none.
	bulk pbbulkv1.BulkServiceClient
	// timeout bounds one request (a bulk stream as a whole); 0: none.
	timeout time.Duration
	types   *typeResolver
	stderr  io.Writer
	// cat is the server's type catalog once asked (catalog.go).
	cat *typeCatalog
}

func (s *session) Close() { s.conn.Close() }

// connect dials the server as the connection flags say. TLS is on when any
// -tls-* flag is given; otherwise the connection is plaintext, like grpcurl
// -plaintext, and a token is sent in the clear.
func (c *clientFlags) connect(ctx context.Context, stderr io.Writer) (*session, error) {
	token := c.token
	if token == "" {
		token = os.Getenv(envToken)
	}
	if _, err := dial.SplitAddrs(c.addr); err != nil {
		return nil, usagef("-addr: give the servers' gRPC addresses, separated by commas (%q has an empty one)", c.addr)
	}
	var opts []dial.Option
	if c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" {
		if (c.tlsCert == "") != (c.tlsKey == "") {
			return nil, usagef("-tls-cert and -tls-key go together")
		}
		opts = append(opts, dial.WithTLS(certs.Files{CA: c.tlsCA, Cert: c.tlsCert, Key: c.tlsKey}))
	} else {
		opts = append(opts, dial.WithInsecure())
	}
	if token != "" {
		opts = append(opts, dial.WithToken(token))
	}
	perRequest := c.perRequest()
	opts = append(opts, dial.WithDialOptions(grpc.WithChainUnaryInterceptor(
		func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			ctx, cancel := context.WithTimeout(ctx, perRequest)
			defer cancel()
			return invoker(ctx, method, req, reply, cc, opts...)
		})))
	conn, err := dial.Dial(c.addr, opts...)
	if err != nil {
		return nil, err
	}
	types, err := newTypeResolver(ctx, conn, c.protoset, perRequest)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return &session{conn: conn, client: pbresource.NewResourceServiceClient(conn), bulk: pbbulkv1.NewBulkServiceClient(conn),
		timeout: perRequest, types: types, stderr: stderr}, nil
}

// session returns the command's connection, made on the first call: a
// command resolving its type names (typeOf) before call uses one
// connection for both.
func (c *clientFlags) session(ctx context.Context, stderr io.Writer) (*session, error) {
	if c.sess == nil {
		s, err := c.connect(ctx, stderr)
		if err != nil {
			return nil, err
		}
		c.sess = s
	}
	return c.sess, nil
}

// call connects (or takes the connection typeOf made) and runs f with the
// session, closing the connection afterwards. Each request f makes is
// bounded by -timeout.
func (c *clientFlags) call(ctx context.Context, stderr io.Writer, f func(context.Context, *session) error) error {
	s, err := c.session(ctx, stderr)
	if err != nil {
		return c.withHint(err)
	}
	defer s.Close()
	return c.withHint(f(ctx, s))
}

// tlsOn reports whether the connection flags turn TLS on.
func (c *clientFlags) tlsOn() bool { return c.tlsCA != "" || c.tlsCert != "" || c.tlsKey != "" }

// hint returns advice for err when its text shows that this client and
// the server disagree about TLS, else "". The texts are gRPC's and Go's
// TLS package's.
func (c *clientFlags) hint(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	switch {
	case !c.tlsOn() && strings.Contains(msg, "server preface"):
		// "error reading server preface", "connection closed before
		// server preface received": the server hung up on plaintext.
		return "the server may expect TLS: give -tls-ca FILE, the CA that signed its certificate"
	case c.tlsOn() && strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the server speaks plaintext: leave out the -tls-* flags"
	case c.tlsCert == "" && c.tlsOn() && (strings.Contains(msg, "certificate required") ||
		strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset")):
		// A server that wants a client certificate (mutual TLS) ends the
		// handshake with "certificate required", which the client may
		// see only as the connection closing under its first write.
		return "the server may require a client certificate: give -tls-cert FILE and -tls-key FILE"
	case c.tlsOn() && strings.Contains(msg, "certificate signed by unknown authority"):
		return "-tls-ca FILE must be the CA that signed the server's certificate (the system's roots are used without -tls-ca)"
	case c.tlsOn() && strings.Contains(msg, "certificate is valid for"):
		return "connect to a name or address the server's certificate is for, or give the server one for this address (loom certs -hosts NAME,IP -force)"
	}
	return ""
}

// withHint returns err with hint's advice for exitCode to print, or err
// itself when there is none.
func (c *clientFlags) withHint(err error) error {
	if h := c.hint(err); h != "" {
		return hintedError{err: err, hint: h}
	}
	return err
}

// hintedError is an error with advice on what to change, printed on a
// line of its own after the error.
type hintedError struct {
	err  error
	hint string
}

func (e hintedError) Error() string { return e.err.Error() }
func (e hintedError) Unwrap() error { return e.err }
