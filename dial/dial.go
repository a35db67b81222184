// Package dial connects a controller process (or any client) to a
// ResourceService over the network — Loom's, or Consul's — with TLS and an
// ACL token, so that a Manager can run in a process of its own:
//
//	conn, err := dial.Dial("loom-1.example:8502,loom-2.example:8502",
//		dial.WithTLS(certs.Files{CA: "ca.pem"}),
//		dial.WithToken(os.Getenv("LOOM_TOKEN")))
//	...
//	mgr, err := controller.NewManager(pbresource.NewResourceServiceClient(conn), logger)
//
// A token travels in the x-consul-token metadata of every call, which Loom
// and Consul servers both read. It is only sent over TLS unless WithInsecure
// says plaintext is meant.
//
// Given several addresses, the connection fails over between them (see
// Dial). All of them must serve the same store.
package dial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/resource"
)

// Option configures Dial.
type Option func(*config)

type config struct {
	tls      *certs.Files
	insecure bool
	token    string
	certOpts []certs.Option
	extra    []grpc.DialOption
}

// WithTLS connects over TLS, verifying the server against files.CA (the
// system's roots when empty) and presenting files.Cert and files.Key when
// set (mutual TLS). The files are read again when they change.
func WithTLS(files certs.Files, opts ...certs.Option) Option {
	return func(c *config) { c.tls, c.certOpts = &files, opts }
}

// WithInsecure connects in plaintext. Without it, Dial refuses to connect
// without TLS.
func WithInsecure() Option { return func(c *config) { c.insecure = true } }

// WithToken sends token with every call.
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithDialOptions adds gRPC dial options (interceptors, keepalive, ...).
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *config) { c.extra = append(c.extra, opts...) }
}

// Dial returns a connection to the server at addrs: one address, or
// several separated by commas ("a:8502,b:8502"). Like grpc.NewClient it
// does not wait for a server: the first call does. It fails when neither
// TLS nor plaintext was chosen, or when both were, when the TLS files
// cannot be loaded, or when an address in the list is empty.
//
// The connection talks to one server at a time, picked at random from
// the list (gRPC's pick_first with a shuffled list), so a client's reads
// stay monotonic while its server lasts and many clients spread over
// the servers. When that server goes away, the next call connects to
// another. Calls that had not reached the server are re-sent by gRPC
// (transparent retry); reads (Read, List, ListByOwner, MutateAndValidate
// and the start of a WatchList) that fail with Unavailable are retried,
// on another server once this one is gone, up to readAttempts times in
// all. Writes whose outcome is unknown are never retried. A broken watch
// stream ends with an error, and re-opening it (the controller cache
// does) reaches another server. A call made while no server is reachable
// fails with Unavailable.
func Dial(addrs string, opts ...Option) (*grpc.ClientConn, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	var dopts []grpc.DialOption
	switch {
	case c.tls != nil && c.insecure:
		return nil, errors.New("dial: WithTLS and WithInsecure both given; choose one")
	case c.tls != nil:
		// Load once now, so that bad files fail Dial; later connections
		// read them again (renewals, a rotated CA).
		if _, err := certs.ClientConfig(*c.tls, c.certOpts...); err != nil {
			return nil, err
		}
		dopts = append(dopts, grpc.WithTransportCredentials(&renewingTLS{files: *c.tls, opts: c.certOpts}))
	case c.insecure:
		dopts = append(dopts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	default:
		return nil, errors.New("dial: give WithTLS (or WithInsecure to connect in plaintext)")
	}
	if c.token != "" {
		dopts = append(dopts, grpc.WithPerRPCCredentials(tokenCreds{md: map[string]string{resource.TokenMetadataKey: c.token}, secure: !c.insecure}))
	}
	list, err := SplitAddrs(addrs)
	if err != nil {
		return nil, err
	}
	// The default service config comes first, so that WithDialOptions
	// can replace it.
	dopts = append([]grpc.DialOption{grpc.WithDefaultServiceConfig(serviceConfig)}, dopts...)
	target := list[0]
	if len(list) > 1 {
		target = resolverScheme + ":///" + strings.Join(list, ",")
		dopts = append(dopts, grpc.WithResolvers(fixedResolver(list)))
	}
	return grpc.NewClient(target, append(dopts, c.extra...)...)
}

// SplitAddrs splits a comma-separated list of server addresses, as -addr
// and $LOOM_ADDR take it, trimming spaces. It fails on an empty list or
// an empty entry.
func SplitAddrs(addrs string) ([]string, error) {
	list := strings.Split(addrs, ",")
	for i, a := range list {
		list[i] = strings.TrimSpace(a)
		if list[i] == "" {
			return nil, fmt.Errorf("dial: empty server address in %q; give host:port, or several separated by commas", addrs)
		}
	}
	return list, nil
}

// resolverScheme names the resolver of a connection to several servers.
const resolverScheme = "loom-servers"

// fixedResolver resolves to addrs. Each address is its own TLS server
// name (and :authority), as a connection to it alone would have, so each
// server's certificate is checked against its own name.
func fixedResolver(addrs []string) resolver.Builder {
	state := resolver.State{Addresses: make([]resolver.Address, len(addrs))}
	for i, a := range addrs {
		state.Addresses[i] = resolver.Address{Addr: a, ServerName: a}
	}
	r := manual.NewBuilderWithScheme(resolverScheme)
	r.InitialState(state)
	return r
}

// readAttempts bounds the attempts of a read that fails with Unavailable
// (gRPC caps it at 5).
const readAttempts = 4

// serviceConfig picks one server at a time from a shuffled list, and
// retries the reads of the ResourceService on Unavailable: they change
// nothing, so a second attempt is safe. Writes are left to gRPC's
// transparent retry, which re-sends only what never reached a server.
var serviceConfig = fmt.Sprintf(`{
	"loadBalancingConfig": [{"pick_first": {"shuffleAddressList": true}}],
	"methodConfig": [{
		"name": [
			{"service": "hashicorp.consul.resource.ResourceService", "method": "Read"},
			{"service": "hashicorp.consul.resource.ResourceService", "method": "List"},
			{"service": "hashicorp.consul.resource.ResourceService", "method": "ListByOwner"},
			{"service": "hashicorp.consul.resource.ResourceService", "method": "MutateAndValidate"},
			{"service": "hashicorp.consul.resource.ResourceService", "method": "WatchList"}
		],
		"retryPolicy": {
			"maxAttempts": %d,
			"initialBackoff": "0.05s",
			"maxBackoff": "1s",
			"backoffMultiplier": 2,
			"retryableStatusCodes": ["UNAVAILABLE"]
		}
	}]
}`, readAttempts)

// renewingTLS is TLS whose configuration is made from the files anew for
// each connection, so a connection made after a renewal uses the new files.
type renewingTLS struct {
	files certs.Files
	opts  []certs.Option
	name  string // set by OverrideServerName
}

func (r *renewingTLS) current() (credentials.TransportCredentials, error) {
	cfg, err := certs.ClientConfig(r.files, r.opts...)
	if err != nil {
		return nil, err
	}
	if r.name != "" {
		cfg.ServerName = r.name
	}
	return credentials.NewTLS(cfg), nil
}

func (r *renewingTLS) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	c, err := r.current()
	if err != nil {
		return nil, nil, err
	}
	return c.ClientHandshake(ctx, authority, conn)
}

func (r *renewingTLS) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("dial: client credentials cannot serve")
}

func (r *renewingTLS) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls", SecurityVersion: "1.2"}
}

func (r *renewingTLS) Clone() credentials.TransportCredentials {
	c := *r
	return &c
}

func (r *renewingTLS) OverrideServerName(name string) error {
	r.name = name
	return nil
}

// tokenCreds sends the token with every call. Its metadata map is made
// once; gRPC only reads it.
type tokenCreds struct {
	md     map[string]string
	secure bool
}

func (t tokenCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return t.md, nil
}

// RequireTransportSecurity keeps a token off plaintext connections unless
// WithInsecure chose them.
func (t tokenCreds) RequireTransportSecurity() bool { return t.secure }
