package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// certsOptions says which certificates `loom certs` writes.
type certsOptions struct {
	dir     string
	hosts   []string // DNS names and IP addresses of the server certificate
	clients []string // names of the client certificates
	valid   time.Duration
	force   bool // replace existing server and client certificates
}

func runCerts(_ context.Context, args []string, stdout, stderr io.Writer) error {
	flags := flag.NewFlagSet("loom certs", flag.ContinueOnError)
	flags.SetOutput(stderr)
	var o certsOptions
	var hosts, clients string
	flags.StringVar(&o.dir, "dir", "certs", "the `directory` the files are written to")
	flags.StringVar(&hosts, "hosts", "localhost,127.0.0.1,::1", "comma-separated DNS names and IP addresses the server certificate is for")
	flags.StringVar(&clients, "clients", "client", "comma-separated `names` of client certificates to write (empty: none)")
	flags.DurationVar(&o.valid, "valid", 365*24*time.Hour, "how long the new certificates are valid")
	flags.BoolVar(&o.force, "force", false, "replace the server and client certificates that exist (the CA is always kept)")
	flags.Usage = func() {
		fmt.Fprintf(stderr, "Usage: loom certs [-dir DIR] [-hosts H,...] [-clients NAME,...]\n\n"+
			"Writes, for development and tests, a certificate authority (ca.crt, ca.key), a server\n"+
			"certificate signed by it for -hosts (server.crt, server.key), and a client certificate\n"+
			"for each of -clients (NAME.crt, NAME.key). A CA already in DIR signs the new\n"+
			"certificates; existing server and client files are kept unless -force.\n"+
			"Keys are ECDSA P-256, written readable by their owner only.\n\nFlags:\n")
		flags.PrintDefaults()
		fmt.Fprintf(stderr, "\nExamples:\n"+
			"  loom certs\n"+
			"  loom server -dev -tls-cert certs/server.crt -tls-key certs/server.key -tls-client-ca certs/ca.crt\n"+
			"  loom list -tls-ca certs/ca.crt -tls-cert certs/client.crt -tls-key certs/client.key demo.v1.Artist\n"+
			"  loom certs -hosts loom.internal,10.0.0.5 -clients ci,alice -force\n")
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{Err: err}
	}
	if flags.NArg() > 0 {
		return usagef("certs takes no arguments (did you mean -hosts %s?)", strings.Join(flags.Args(), ","))
	}
	o.hosts, o.clients = splitList(hosts), splitList(clients)
	if len(o.hosts) == 0 {
		return usagef("certs: -hosts is empty: the server certificate needs a name or address")
	}
	if o.valid <= 0 {
		return usagef("certs: -valid must be positive")
	}
	written, err := writeCerts(o)
	for _, f := range written {
		fmt.Fprintln(stdout, f)
	}
	return err
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// writeCerts writes the files o asks for and returns the paths it wrote.
func writeCerts(o certsOptions) (written []string, err error) {
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	ca, caKey, created, err := loadOrCreateCA(o.dir, o.valid)
	if err != nil {
		return nil, err
	}
	if created {
		written = append(written, filepath.Join(o.dir, "ca.crt"), filepath.Join(o.dir, "ca.key"))
	}
	leaves := []leafSpec{{name: "server", hosts: o.hosts, usage: x509.ExtKeyUsageServerAuth}}
	for _, c := range o.clients {
		if c == "ca" || c == "server" || strings.ContainsAny(c, `/\`) {
			return written, usagef("certs: %q cannot name a client certificate", c)
		}
		leaves = append(leaves, leafSpec{name: c, usage: x509.ExtKeyUsageClientAuth})
	}
	for _, l := range leaves {
		certFile := filepath.Join(o.dir, l.name+".crt")
		if _, err := os.Stat(certFile); err == nil && !o.force {
			continue
		}
		certPEM, keyPEM, err := newCert(ca, caKey, l, o.valid)
		if err != nil {
			return written, err
		}
		if err := writePEMFiles(certFile, certPEM, filepath.Join(o.dir, l.name+".key"), keyPEM); err != nil {
			return written, err
		}
		written = append(written, certFile, filepath.Join(o.dir, l.name+".key"))
	}
	return written, nil
}

// leafSpec is one certificate the CA signs.
type leafSpec struct {
	name  string // common name and file name
	hosts []string
	usage x509.ExtKeyUsage
}

// loadOrCreateCA reads dir's ca.crt and ca.key, or writes new ones.
func loadOrCreateCA(dir string, valid time.Duration) (*x509.Certificate, crypto.Signer, bool, error) {
	certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	certPEM, err := os.ReadFile(certFile)
	if err == nil {
		ca, key, err := parseCA(certPEM, keyFile)
		return ca, key, false, err
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, false, fmt.Errorf("certs: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, false, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(), Subject: pkix.Name{CommonName: "Loom development CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(valid),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, false, fmt.Errorf("certs: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, false, err
	}
	keyPEM, err := keyToPEM(key)
	if err != nil {
		return nil, nil, false, err
	}
	return ca, key, true, writePEMFiles(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyFile, keyPEM)
}

// parseCA reads an existing CA's certificate and its key file.
func parseCA(certPEM []byte, keyFile string) (*x509.Certificate, crypto.Signer, error) {
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, nil, errors.New("certs: ca.crt holds no PEM certificate: move it away to make a new CA")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: ca.crt: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: the CA's key: %w", err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, nil, errors.New("certs: ca.key holds no PEM key")
	}
	key, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: ca.key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, errors.New("certs: ca.key is not a signing key")
	}
	return ca, signer, nil
}

// newCert makes a certificate and key for l, signed by ca.
func newCert(ca *x509.Certificate, caKey crypto.Signer, l leafSpec, valid time.Duration) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(), Subject: pkix.Name{CommonName: l.name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(valid),
		ExtKeyUsage: []x509.ExtKeyUsage{l.usage}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	for _, h := range l.hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %s: %w", l.name, err)
	}
	keyPEM, err = keyToPEM(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, err
}

func keyToPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// randomSerial is a 128-bit serial number, unique without keeping count.
func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// writePEMFiles writes a certificate and its key, the key readable by its
// owner only.
func writePEMFiles(certFile string, certPEM []byte, keyFile string, keyPEM []byte) error {
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}
