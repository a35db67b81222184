package certs_test

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/internal/testkit/testcerts"
)

func write(t *testing.T, path string, data []byte) string {
	t.Helper()
	return testcerts.Write(t, path, data)
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
	ca := testcerts.NewAuthority(t, "ca")
	c1, k1 := ca.Leaf(t, "server-1")
	files := certs.Files{Cert: write(t, filepath.Join(dir, "tls.crt"), c1), Key: write(t, filepath.Join(dir, "tls.key"), k1)}
	var reloadErrs []error
	sc, err := certs.ServerConfig(files, certs.CheckEvery(0), certs.OnReloadError(func(err error) { reloadErrs = append(reloadErrs, err) }))
	require.NoError(t, err)
	cc, err := certs.ClientConfig(certs.Files{CA: write(t, filepath.Join(dir, "ca.crt"), ca.PEM)})
	require.NoError(t, err)

	name, _, err := handshake(t, sc, cc)
	require.NoError(t, err)
	assert.Equal(t, "server-1", name)

	// Renewed: the next handshake presents the new certificate.
	c2, k2 := ca.Leaf(t, "server-2")
	write(t, files.Cert, c2)
	write(t, files.Key, k2)
	name, _, err = handshake(t, sc, cc)
	require.NoError(t, err)
	assert.Equal(t, "server-2", name)

	// Half written (a certificate without its key): the previous one stays.
	c3, _ := ca.Leaf(t, "server-3")
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
	ca, other := testcerts.NewAuthority(t, "ca"), testcerts.NewAuthority(t, "other-ca")
	sCert, sKey := ca.Leaf(t, "server")
	caFile := write(t, filepath.Join(dir, "ca.crt"), ca.PEM)
	sc, err := certs.ServerConfig(certs.Files{
		Cert: write(t, filepath.Join(dir, "s.crt"), sCert), Key: write(t, filepath.Join(dir, "s.key"), sKey), CA: caFile,
	})
	require.NoError(t, err)

	noCert, err := certs.ClientConfig(certs.Files{CA: caFile})
	require.NoError(t, err)
	_, _, err = handshake(t, sc, noCert)
	require.Error(t, err, "a client without a certificate is refused")

	oc, ok := other.Leaf(t, "stranger")
	strangerCfg, err := certs.ClientConfig(certs.Files{CA: caFile, Cert: write(t, filepath.Join(dir, "o.crt"), oc), Key: write(t, filepath.Join(dir, "o.key"), ok)})
	require.NoError(t, err)
	_, _, err = handshake(t, sc, strangerCfg)
	require.Error(t, err, "a certificate from another CA is refused")

	cc, ck := ca.Leaf(t, "client")
	good, err := certs.ClientConfig(certs.Files{CA: caFile, Cert: write(t, filepath.Join(dir, "c.crt"), cc), Key: write(t, filepath.Join(dir, "c.key"), ck)})
	require.NoError(t, err)
	serverName, clientName, err := handshake(t, sc, good)
	require.NoError(t, err)
	assert.Equal(t, "server", serverName)
	assert.Equal(t, "client", clientName)

	// The client refuses a server its CA did not sign.
	oCert, oKey := other.Leaf(t, "impostor")
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

// TestOnLoadInBackground: OnLoad tells of the first files and of each
// change, with the leaf and the CA's expiry; with CheckInBackground a
// change is loaded, and a bad file reported, without any handshake.
func TestOnLoadInBackground(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "ca")
	now := time.Now().Truncate(time.Second)
	c1, k1 := ca.LeafValid(t, "server-1", now.Add(-time.Hour), now.Add(48*time.Hour))
	files := certs.Files{Cert: write(t, filepath.Join(dir, "tls.crt"), c1), Key: write(t, filepath.Join(dir, "tls.key"), k1),
		CA: write(t, filepath.Join(dir, "ca.crt"), ca.PEM)}
	loads := make(chan certs.Loaded, 4)
	errs := make(chan error, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := certs.ServerConfig(files, certs.CheckEvery(10*time.Millisecond), certs.CheckInBackground(ctx),
		certs.OnLoad(func(l certs.Loaded) { loads <- l }), certs.OnReloadError(func(err error) { errs <- err }))
	require.NoError(t, err)

	first := <-loads
	assert.Equal(t, "server-1", first.Cert.Subject.CommonName)
	assert.True(t, first.Cert.NotAfter.Equal(now.Add(48*time.Hour)), "leaf NotAfter %s", first.Cert.NotAfter)
	assert.False(t, first.CAExpiry.IsZero(), "the CA's expiry")

	c2, k2 := ca.LeafValid(t, "server-2", now.Add(-time.Hour), now.Add(72*time.Hour))
	write(t, files.Key, k2)
	write(t, files.Cert, c2)
	select {
	case l := <-loads:
		assert.Equal(t, "server-2", l.Cert.Subject.CommonName)
		assert.True(t, l.Cert.NotAfter.Equal(now.Add(72*time.Hour)))
	case <-time.After(10 * time.Second):
		t.Fatal("the renewed certificate was not loaded in the background within 10s")
	}

	for len(errs) > 0 {
		<-errs // the key written before its certificate, a moment ago
	}
	write(t, files.Cert, []byte("not PEM"))
	select {
	case err := <-errs:
		assert.ErrorContains(t, err, files.Cert)
		assert.ErrorContains(t, err, "previous certificates stay in force")
	case <-time.After(10 * time.Second):
		t.Fatal("a bad certificate file was not reported in the background within 10s")
	}
}
