package host

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/certs"
)

// certExpiryGauge is loom_tls_cert_expiry_timestamp_seconds: when the
// certificates in force expire, by cert: "server" (-tls-cert) and
// "client_ca" (the first of -tls-client-ca's to expire).
func certExpiryGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "loom_tls_cert_expiry_timestamp_seconds",
		Help: "When the TLS certificate in force expires, in seconds since the Unix epoch, by cert: server (-tls-cert) or client_ca (the first of -tls-client-ca's to expire). Updated on each reload.",
	}, []string{"cert"})
}

// tlsOption returns the gRPC server option that turns TLS on with the
// -tls-* files (mutual TLS with -tls-client-ca), nil without -tls-cert. The
// files are read now, so a missing or bad one stops the host before it
// serves (never in plaintext by mistake), and again every -reload-interval
// until ctx ends: each load is logged with the certificate's serial and
// expiry, and sets expiry.
func tlsOption(ctx context.Context, f config, logger hclog.Logger, expiry *prometheus.GaugeVec) (grpc.ServerOption, error) {
	if f.tlsCert == "" {
		return nil, nil
	}
	loads := 0
	cfg, err := certs.ServerConfig(certs.Files{Cert: f.tlsCert, Key: f.tlsKey, CA: f.tlsClientCA},
		certs.CheckEvery(f.reloadInterval), certs.CheckInBackground(ctx),
		certs.OnLoad(func(l certs.Loaded) {
			loads++
			msg := "TLS certificate loaded"
			if loads > 1 {
				msg = "TLS certificate reloaded"
			}
			args := []any{"cert", f.tlsCert, "serial", l.Cert.SerialNumber.Text(16), "not_after", l.Cert.NotAfter.UTC()}
			expiry.WithLabelValues("server").Set(float64(l.Cert.NotAfter.Unix()))
			if !l.CAExpiry.IsZero() {
				args = append(args, "client_ca_not_after", l.CAExpiry.UTC())
				expiry.WithLabelValues("client_ca").Set(float64(l.CAExpiry.Unix()))
			}
			logger.Info(msg, args...)
		}),
		certs.OnReloadError(func(err error) {
			logger.Error("TLS files not reloaded", "error", err)
		}))
	if err != nil {
		return nil, fmt.Errorf("-tls-cert/-tls-key/-tls-client-ca: %w", err)
	}
	logger.Info("TLS on the gRPC listener", "cert", f.tlsCert, "mutual", f.tlsClientCA != "")
	return grpc.Creds(credentials.NewTLS(cfg)), nil
}

// httpTLS returns the TLS config of the HTTP endpoints with -http-tls: the
// -tls-cert certificate, without asking for a client certificate (probes
// have none). Nil without -http-tls.
func httpTLS(f config, logger hclog.Logger) (*tls.Config, error) {
	if !f.httpTLS {
		return nil, nil
	}
	cfg, err := certs.ServerConfig(certs.Files{Cert: f.tlsCert, Key: f.tlsKey}, certs.CheckEvery(f.reloadInterval),
		certs.OnReloadError(func(err error) {
			logger.Error("TLS files of the HTTP endpoints not reloaded", "error", err)
		}))
	if err != nil {
		return nil, fmt.Errorf("-http-tls: %w", err)
	}
	return cfg, nil
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
