// Package certs loads the TLS certificate, key and CA files of a server or
// a client, and reloads them when they change, so a host picks up renewed
// certificates without a restart.
//
// A server config (ServerConfig) presents its certificate and, given a
// client CA file, requires and verifies client certificates (mutual TLS).
// A client config (ClientConfig) verifies the server against a CA file
// and, given a certificate and key, presents them. A handshake reads the
// files again when CheckInterval has passed since they were last read
// (CheckEvery changes it); a changed set of files is loaded whole, and one
// that fails to load (half written, say) leaves the previous one in force
// and is reported through the OnReloadError callback. A certificate that
// is expired, or not valid yet, fails to load like a malformed one: a
// config is not made with it, and a reload keeps the previous one (and
// takes it once it is valid, if it was early).
package certs

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// CheckInterval is how often, at most, a handshake reads the files again,
// unless CheckEvery says otherwise.
const CheckInterval = time.Second

// Files names PEM files. For a server: Cert and Key are required; ClientCA,
// when set, turns on mutual TLS. For a client: CA (the server's CA; the
// system pool when empty), and Cert with Key to present a certificate.
type Files struct {
	Cert, Key string
	// CA verifies the peer: the server's CA for a client, the clients' CA
	// (mutual TLS) for a server.
	CA string
}

// Option configures a config's reloading.
type Option func(*reloader)

// CheckEvery sets how often, at most, a handshake reads the files again;
// 0 reads them on every handshake.
func CheckEvery(d time.Duration) Option { return func(r *reloader) { r.interval = d } }

// OnReloadError sets what is told when changed files fail to load (the
// previous certificates stay in force). By default nothing is.
func OnReloadError(fn func(error)) Option { return func(r *reloader) { r.onError = fn } }

// Loaded describes a set of files just loaded, for logs and metrics.
type Loaded struct {
	// Cert is the leaf certificate of Files.Cert; nil without one.
	Cert *x509.Certificate
	// CAExpiry is when the first of the CA file's certificates expires;
	// zero without a CA file.
	CAExpiry time.Time
	// CAs holds the CA file's certificates; nil without a CA file. It is
	// not modified after the load.
	CAs *x509.CertPool
}

// OnLoad sets what is told of each set of files loaded: the first, when
// the config is made, and every reload after a change. fn runs while
// handshakes wait for the files: keep it short.
func OnLoad(fn func(Loaded)) Option { return func(r *reloader) { r.onLoad = fn } }

// CheckInBackground reads the files every CheckEvery interval (every
// CheckInterval when it is 0) until ctx ends, besides at handshakes: so a reload, or a
// file that fails to load, is reported when it happens rather than at the
// next handshake.
func CheckInBackground(ctx context.Context) Option {
	return func(r *reloader) { r.background = ctx }
}

// ServerConfig returns a TLS config serving f.Cert and f.Key, requiring and
// verifying client certificates signed by f.CA when it is set. It fails
// when a file cannot be loaded, naming it: a server must not start without
// the TLS it was asked for.
func ServerConfig(f Files, opts ...Option) (*tls.Config, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("TLS: both a certificate and a key file are needed")
	}
	r, err := newReloader(f, opts)
	if err != nil {
		return nil, err
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			m := r.current()
			c := base.Clone()
			c.Certificates = []tls.Certificate{*m.cert}
			if m.pool != nil {
				c.ClientAuth = tls.RequireAndVerifyClientCert
				c.ClientCAs = m.pool
			}
			return c, nil
		},
	}, nil
}

// ClientConfig returns a TLS config that verifies the server against f.CA
// (the system's roots when empty) and presents f.Cert and f.Key when both
// are set, read again when they change. The CA is the one in the file when
// the config is made: to follow a renewed CA, make a config per connection
// (as package dial does), or verify against the CAs of each load (OnLoad).
func ClientConfig(f Files, opts ...Option) (*tls.Config, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, errors.New("TLS: a client certificate needs both its certificate and its key file")
	}
	r, err := newReloader(f, opts)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: r.m.pool}
	if f.Cert != "" {
		c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return r.current().cert, nil
		}
	}
	return c, nil
}

// material is one loaded set of files.
type material struct {
	cert   *tls.Certificate // nil when no certificate was asked for
	pool   *x509.CertPool   // nil when no CA was asked for
	loaded Loaded
	sum    [sha256.Size]byte
}

type reloader struct {
	files    Files
	interval time.Duration
	onError  func(error)
	onLoad   func(Loaded)
	// background, when set, has the files read every interval until it
	// ends.
	background context.Context

	mu      sync.Mutex
	m       *material
	checked time.Time
	lastErr string
}

func newReloader(f Files, opts []Option) (*reloader, error) {
	r := &reloader{files: f, interval: CheckInterval}
	for _, o := range opts {
		o(r)
	}
	m, err := load(f)
	if err != nil {
		return nil, err
	}
	r.m, r.checked = m, time.Now()
	if r.onLoad != nil {
		r.onLoad(m.loaded)
	}
	if r.background != nil {
		go r.checkUntilDone()
	}
	return r, nil
}

// checkUntilDone reads the files every interval until r.background ends.
func (r *reloader) checkUntilDone() {
	every := r.interval
	if every <= 0 {
		every = CheckInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-r.background.Done():
			return
		case <-t.C:
			r.current()
		}
	}
}

// current returns the material in force, loading the files again first
// when the interval has passed since they were last read and they changed.
func (r *reloader) current() *material {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.interval > 0 && time.Since(r.checked) < r.interval {
		return r.m
	}
	r.checked = time.Now()
	m, err := load(r.files)
	switch {
	case err != nil:
		if msg := err.Error(); r.onError != nil && msg != r.lastErr {
			r.lastErr = msg
			r.onError(fmt.Errorf("%w (the previous certificates stay in force)", err))
		}
	case m.sum != r.m.sum:
		r.m, r.lastErr = m, ""
		if r.onLoad != nil {
			r.onLoad(m.loaded)
		}
	}
	return r.m
}

// load reads and parses the files of f, naming the one at fault in an
// error.
func load(f Files) (*material, error) {
	read := func(what, path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("TLS: reading the %s file: %w", what, err)
		}
		return b, nil
	}
	m := &material{}
	h := sha256.New()
	if f.Cert != "" {
		certPEM, err := read("certificate", f.Cert)
		if err != nil {
			return nil, err
		}
		keyPEM, err := read("key", f.Key)
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("TLS: certificate %s with key %s: %w", f.Cert, f.Key, err)
		}
		leaf := cert.Leaf // nil only with GODEBUG x509keypairleaf=0
		if leaf == nil {
			if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
				return nil, fmt.Errorf("TLS: certificate %s: %w", f.Cert, err)
			}
		}
		if err := checkValidity(f.Cert, leaf, time.Now()); err != nil {
			return nil, err
		}
		m.cert = &cert
		m.loaded.Cert = leaf
		h.Write(certPEM)
		h.Write(keyPEM)
	}
	if f.CA != "" {
		pem, err := read("CA", f.CA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS: CA file %s holds no PEM certificate", f.CA)
		}
		m.pool = pool
		m.loaded.CAExpiry, m.loaded.CAs = firstExpiry(pem), pool
		h.Write(pem)
	}
	h.Sum(m.sum[:0])
	return m, nil
}

// checkValidity refuses a certificate, read from file, that is not valid
// at now: whoever checks it would refuse every handshake. (Only the leaf
// is checked, not the chain nor the CA files.)
func checkValidity(file string, c *x509.Certificate, now time.Time) error {
	var what string
	switch {
	case now.Before(c.NotBefore):
		what = "is not valid yet"
	case now.After(c.NotAfter):
		what = "has expired"
	default:
		return nil
	}
	const layout = time.RFC3339
	return fmt.Errorf("TLS: certificate %s %s: valid from %s until %s, and it is %s: renew it, or check this machine's clock",
		file, what, c.NotBefore.UTC().Format(layout), c.NotAfter.UTC().Format(layout), now.UTC().Format(layout))
}

// firstExpiry returns the earliest NotAfter of the certificates in
// pemData (zero when none parses).
func firstExpiry(pemData []byte) time.Time {
	var first time.Time
	for {
		var block *pem.Block
		if block, pemData = pem.Decode(pemData); block == nil {
			return first
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err == nil && (first.IsZero() || c.NotAfter.Before(first)) {
			first = c.NotAfter
		}
	}
}
