package host

import (
	"fmt"
	"net"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/certs"
)

// tlsOption returns the gRPC server option that turns TLS on with the
// -tls-* files (mutual TLS with -tls-client-ca), nil without -tls-cert. The
// files are read now, so a missing or bad one stops the host before it
// serves (never in plaintext by mistake), and again when they change.
func tlsOption(f config, logger hclog.Logger) (grpc.ServerOption, error) {
	if f.tlsCert == "" {
		return nil, nil
	}
	cfg, err := certs.ServerConfig(certs.Files{Cert: f.tlsCert, Key: f.tlsKey, CA: f.tlsClientCA},
		certs.CheckEvery(f.reloadInterval),
		certs.OnReloadError(func(err error) {
			logger.Error("TLS files not reloaded", "error", err)
		}))
	if err != nil {
		return nil, fmt.Errorf("-tls-cert/-tls-key/-tls-client-ca: %w", err)
	}
	logger.Info("TLS on the gRPC listener", "cert", f.tlsCert, "mutual", f.tlsClientCA != "")
	return grpc.Creds(credentials.NewTLS(cfg)), nil
}

// aclSource loads -acl-file, nil without it. A file that cannot be read or
// parsed stops the host: it never starts open.
func aclSource(f config, logger hclog.Logger) (*acl.Source, error) {
	if f.aclFile == "" {
		return nil, nil
	}
	src, err := acl.NewSource(f.aclFile, logger)
	if err != nil {
		return nil, fmt.Errorf("-acl-file: %w", err)
	}
	logger.Info("ACLs on", "file", f.aclFile, "tokens", src.Policy().Len())
	return src, nil
}

// warnPlaintextTokens warns, once, when ACLs are on without TLS on an
// address other machines can reach (which includes 0.0.0.0 and ::): the
// callers' tokens then cross the network in the clear.
func warnPlaintextTokens(f config, addr net.Addr, logger hclog.Logger) {
	if f.aclFile == "" || f.tlsCert != "" {
		return
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return
	}
	logger.Warn("ACL tokens travel in plaintext: -acl-file without TLS on a non-loopback address; turn TLS on (-tls-cert, -tls-key) or listen on loopback",
		"addr", addr.String())
}
