package host

import (
	"bytes"
	"crypto/tls"
	"testing"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/internal/testcerts"
)

// TestEtcdClientCertReload: the client certificate the host presents to
// etcd follows -etcd-cert and -etcd-key when they change, as the gRPC
// listener's does; files that fail to load leave the previous one in
// force, and say so.
func TestEtcdClientCertReload(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "etcd-ca")
	f := etcdFlags{ca: ca.WriteCA(t, dir, "ca.pem")}
	f.cert, f.key = ca.WriteLeaf(t, dir, "client")
	var reloadErr error
	cfg, err := f.tlsConfig(certs.CheckEvery(0), certs.OnReloadError(func(err error) { reloadErr = err }))
	if err != nil {
		t.Fatal(err)
	}
	presented := func() []byte {
		t.Helper()
		c, err := cfg.GetClientCertificate(&tls.CertificateRequestInfo{})
		if err != nil || c == nil {
			t.Fatalf("GetClientCertificate: %v", err)
		}
		return c.Certificate[0]
	}
	first := presented()

	certPEM, keyPEM := ca.Leaf(t, "renewed")
	testcerts.Write(t, f.cert, certPEM)
	testcerts.Write(t, f.key, keyPEM)
	if renewed := presented(); bytes.Equal(renewed, first) {
		t.Fatal("the renewed client certificate is not presented")
	}

	testcerts.Write(t, f.cert, []byte("not a certificate"))
	if got := presented(); bytes.Equal(got, first) || reloadErr == nil {
		t.Fatalf("a bad file: presented the first certificate again or kept quiet (error %v)", reloadErr)
	}
}
