package certs_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/certs"
)

// authority is a test CA that signs leaf certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newAuthority(t *testing.T, name string) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

var serial int64 = 100

// leaf returns the PEM certificate and key of a leaf named name.
func (a *authority) leaf(t *testing.T, name string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	serial++
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func write(t *testing.T, path string, data []byte) string {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o600))
	return path
}

// handshake connects a client with cc to a server with sc over a pipe and
// returns the certificate names each side saw, or the handshake's error.
func handshake(t *testing.T, sc, cc *tls.Config) (serverName, clientName string, err error) {
	t.Helper()
	// A loopback TCP connection, not net.Pipe: the kernel buffers an alert
	// the server sends while the client is not reading.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	b, err := net.Dial("tcp", lis.Addr().String())
	require.NoError(t, err)
	defer b.Close()
	a, err := lis.Accept()
	require.NoError(t, err)
	defer a.Close()
	deadline := time.Now().Add(30 * time.Second)
	require.NoError(t, a.SetDeadline(deadline))
	require.NoError(t, b.SetDeadline(deadline))
	srv := tls.Server(a, sc)
	done := make(chan error, 1)
	go func() { done <- srv.Handshake() }()
	cc = cc.Clone()
	cc.ServerName = "localhost"
	cli := tls.Client(b, cc)
	err = cli.Handshake()
	if err != nil {
		b.Close()
		<-done
		return "", "", err
	}
	if err := <-done; err != nil {
		return "", "", err
	}
	if peers := srv.ConnectionState().PeerCertificates; len(peers) > 0 {
		clientName = peers[0].Subject.CommonName
	}
	return cli.ConnectionState().PeerCertificates[0].Subject.CommonName, clientName, nil
}

func TestServerReloadsRenewedCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := newAuthority(t, "ca")
	c1, k1 := ca.leaf(t, "server-1")
	files := certs.Files{Cert: write(t, filepath.Join(dir, "tls.crt"), c1), Key: write(t, filepath.Join(dir, "tls.key"), k1)}
	var reloadErrs []error
	sc, err := certs.ServerConfig(files, certs.CheckEvery(0), certs.OnReloadError(func(err error) { reloadErrs = append(reloadErrs, err) }))
	require.NoError(t, err)
	cc, err := certs.ClientConfig(certs.Files{CA: write(t, filepath.Join(dir, "ca.crt"), ca.pem)})
	require.NoError(t, err)

	name, _, err := handshake(t, sc, cc)
	require.NoError(t, err)
	assert.Equal(t, "server-1", name)

	// Renewed: the next handshake presents the new certificate.
	c2, k2 := ca.leaf(t, "server-2")
	write(t, files.Cert, c2)
	write(t, files.Key, k2)
	name, _, err = handshake(t, sc, cc)
	require.NoError(t, err)
	assert.Equal(t, "server-2", name)

	// Half written (a certificate without its key): the previous one stays.
	c3, _ := ca.leaf(t, "server-3")
	write(t, files.Cert, c3)
	name, _, err = handshake(t, sc, cc)
	require.NoError(t, err)
	assert.Equal(t, "server-2", name)
	_, _, _ = handshake(t, sc, cc)
	require.Len(t, reloadErrs, 1, "a failing reload is reported once")
	assert.ErrorContains(t, reloadErrs[0], "previous certificates stay in force")
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, other := newAuthority(t, "ca"), newAuthority(t, "other-ca")
	sCert, sKey := ca.leaf(t, "server")
	caFile := write(t, filepath.Join(dir, "ca.crt"), ca.pem)
	sc, err := certs.ServerConfig(certs.Files{
		Cert: write(t, filepath.Join(dir, "s.crt"), sCert), Key: write(t, filepath.Join(dir, "s.key"), sKey), CA: caFile,
	})
	require.NoError(t, err)

	noCert, err := certs.ClientConfig(certs.Files{CA: caFile})
	require.NoError(t, err)
	_, _, err = handshake(t, sc, noCert)
	require.Error(t, err, "a client without a certificate is refused")

	oc, ok := other.leaf(t, "stranger")
	strangerCfg, err := certs.ClientConfig(certs.Files{CA: caFile, Cert: write(t, filepath.Join(dir, "o.crt"), oc), Key: write(t, filepath.Join(dir, "o.key"), ok)})
	require.NoError(t, err)
	_, _, err = handshake(t, sc, strangerCfg)
	require.Error(t, err, "a certificate from another CA is refused")

	cc, ck := ca.leaf(t, "client")
	good, err := certs.ClientConfig(certs.Files{CA: caFile, Cert: write(t, filepath.Join(dir, "c.crt"), cc), Key: write(t, filepath.Join(dir, "c.key"), ck)})
	require.NoError(t, err)
	serverName, clientName, err := handshake(t, sc, good)
	require.NoError(t, err)
	assert.Equal(t, "server", serverName)
	assert.Equal(t, "client", clientName)

	// The client refuses a server its CA did not sign.
	oCert, oKey := other.leaf(t, "impostor")
	impostor, err := certs.ServerConfig(certs.Files{Cert: write(t, filepath.Join(dir, "i.crt"), oCert), Key: write(t, filepath.Join(dir, "i.key"), oKey)})
	require.NoError(t, err)
	_, _, err = handshake(t, impostor, good)
	require.Error(t, err)
}

func TestBadFilesNameTheFile(t *testing.T) {
	dir := t.TempDir()
	_, err := certs.ServerConfig(certs.Files{Cert: filepath.Join(dir, "missing.crt"), Key: filepath.Join(dir, "missing.key")})
	assert.ErrorContains(t, err, "missing.crt")
	_, err = certs.ServerConfig(certs.Files{Cert: filepath.Join(dir, "x.crt")})
	assert.ErrorContains(t, err, "both a certificate and a key")
	garbage := write(t, filepath.Join(dir, "garbage.pem"), []byte("not a certificate"))
	_, err = certs.ClientConfig(certs.Files{CA: garbage})
	assert.ErrorContains(t, err, "garbage.pem holds no PEM certificate")
	_, err = certs.ClientConfig(certs.Files{Cert: garbage})
	assert.ErrorContains(t, err, "needs both")
}
