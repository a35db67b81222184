// Package dial connects a controller process (or any client) to a
// ResourceService over the network — Loom's, or Consul's — with TLS and an
// ACL token, so that a Manager can run in a process of its own:
//
//	conn, err := dial.Dial("loom.example:8502",
//		dial.WithTLS(certs.Files{CA: "ca.pem"}),
//		dial.WithToken(os.Getenv("LOOM_TOKEN")))
//	...
//	mgr, err := controller.NewManager(pbresource.NewResourceServiceClient(conn), logger)
//
// A token travels in the x-consul-token metadata of every call, which Loom
// and Consul servers both read. It is only sent over TLS unless WithInsecure
// says plaintext is meant.
package dial

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

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

// Dial returns a connection to the server at addr. Like grpc.NewClient it
// does not wait for the server: the first call does. It fails when neither
// TLS nor plaintext was chosen, or when both were, or when the TLS files
// cannot be loaded.
func Dial(addr string, opts ...Option) (*grpc.ClientConn, error) {
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
	return grpc.NewClient(addr, append(dopts, c.extra...)...)
}

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
