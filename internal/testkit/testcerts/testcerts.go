// Package testcerts makes throw-away certificate authorities and
// certificates for tests of TLS: a CA, and leaf certificates it signs for
// "localhost" and 127.0.0.1, written as PEM files.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Authority is a test CA.
type Authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded.
	PEM []byte
}

var serial atomic.Int64

// NewAuthority returns a CA named name, valid for an hour either side of now.
func NewAuthority(t testing.TB, name string) *Authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Authority{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Leaf returns the PEM certificate and key of a leaf named name, for
// "localhost" and 127.0.0.1, usable by servers and clients, valid for an
// hour either side of now.
func (a *Authority) Leaf(t testing.TB, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	return a.LeafValid(t, name, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// LeafValid is Leaf valid from notBefore to notAfter.
func (a *Authority) LeafValid(t testing.TB, name string, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: notBefore, NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// WriteLeaf writes a new leaf's certificate and key to dir as name.crt and
// name.key and returns their paths.
func (a *Authority) WriteLeaf(t testing.TB, dir, name string) (certFile, keyFile string) {
	t.Helper()
	c, k := a.Leaf(t, name)
	return Write(t, filepath.Join(dir, name+".crt"), c), Write(t, filepath.Join(dir, name+".key"), k)
}

// WriteCA writes the CA certificate to dir as name.crt and returns its path.
func (a *Authority) WriteCA(t testing.TB, dir, name string) string {
	t.Helper()
	return Write(t, filepath.Join(dir, name+".crt"), a.PEM)
}

// Write writes data to path and returns path.
func Write(t testing.TB, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
