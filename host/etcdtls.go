package host

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/loomrt/loom/certs"
)

// tlsConfig returns the TLS configuration for etcd, nil without TLS flags.
// The files are read now, so a missing or bad one stops the host; they are
// read again every `every` until ctx ends (and, for the client certificate,
// at handshakes), as the gRPC listener's are. A changed set that loads
// replaces the previous one, for the connections made after it; one that
// fails to load leaves the previous one in force and is logged. With
// -etcd-ca, etcd's server certificate is verified against the CA pool in
// force at each handshake (see etcdServerCheck).
func (f *etcdFlags) tlsConfig(ctx context.Context, every time.Duration, logger hclog.Logger) (*tls.Config, error) {
	if f.ca == "" && f.cert == "" {
		return nil, nil
	}
	check := &etcdServerCheck{ips: endpointIPs(f.endpointList())}
	cfg, err := certs.ClientConfig(certs.Files{Cert: f.cert, Key: f.key, CA: f.ca},
		certs.CheckEvery(every), certs.CheckInBackground(ctx),
		certs.OnLoad(func(l certs.Loaded) { check.pool.Store(l.CAs) }),
		certs.OnReloadError(func(err error) {
			logger.Error("etcd client TLS files not reloaded", "error", err)
		}))
	if err != nil {
		return nil, fmt.Errorf("-etcd-ca/-etcd-cert/-etcd-key: %w", err)
	}
	if f.ca != "" {
		// The config's own verification would use the pool of the first
		// load for ever (the etcd client keeps one config for all its
		// connections): skip it for a check that takes the pool in force.
		cfg.RootCAs = nil
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = check.verify
	}
	return cfg, nil
}

// etcdServerCheck verifies etcd's server certificate, as a TLS client
// does, against the -etcd-ca pool in force: a chain to one of its CAs,
// for server authentication, naming the host connected to.
type etcdServerCheck struct {
	pool atomic.Pointer[x509.CertPool] // swapped at each load of -etcd-ca
	// ips are the IP addresses of -etcd-endpoints: a TLS client sends no
	// name for them, so ConnectionState does not say which one it
	// connected to.
	ips []net.IP
}

func (c *etcdServerCheck) verify(cs tls.ConnectionState) error {
	pool := c.pool.Load()
	if pool == nil {
		return errors.New("etcd's server certificate cannot be verified: no -etcd-ca loaded")
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("etcd presented no server certificate")
	}
	opts := x509.VerifyOptions{
		Roots:         pool,
		DNSName:       cs.ServerName, // empty: checked below
		Intermediates: x509.NewCertPool(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, cert := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(cert)
	}
	leaf := cs.PeerCertificates[0]
	if _, err := leaf.Verify(opts); err != nil {
		return fmt.Errorf("etcd's server certificate: %w", err)
	}
	if cs.ServerName != "" {
		return nil
	}
	// No name was sent: the endpoint was an IP address. Caveat: which of
	// -etcd-endpoints' addresses is not known here, so a certificate of
	// the CA for any of them is accepted on a connection to any of them.
	for _, ip := range c.ips {
		if leaf.VerifyHostname(ip.String()) == nil {
			return nil
		}
	}
	return errors.New("etcd's server certificate names none of the -etcd-endpoints addresses")
}

// endpointIPs returns the IP addresses among endpoints (host:port, or a
// URL).
func endpointIPs(endpoints []string) []net.IP {
	var ips []net.IP
	for _, e := range endpoints {
		if strings.Contains(e, "://") {
			u, err := url.Parse(e)
			if err != nil {
				continue
			}
			e = u.Host
		}
		host, _, err := net.SplitHostPort(e)
		if err != nil {
			host = e
		}
		if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
			ips = append(ips, ip)
		}
	}
	return ips
}
