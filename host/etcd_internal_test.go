package host

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/loomrt/loom/internal/testkit/testcerts"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
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
	log := &testlog.Buffer{}
	cfg, err := f.tlsConfig(t.Context(), 0, hclog.New(&hclog.LoggerOptions{Output: log}))
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
	if got := presented(); bytes.Equal(got, first) || !strings.Contains(log.String(), "etcd client TLS files not reloaded") {
		t.Fatalf("a bad file: presented the first certificate again or kept quiet; log:\n%s", log)
	}
}

// TestEtcdCAReload: etcd's server certificate is verified against the
// -etcd-ca in force when a connection is made. A certificate of another
// CA, or for another host, is refused; once the CA file holds the CA that
// signed etcd's new certificate, the etcd client reconnects without a
// restart; a bad CA file leaves the previous CA in force, and says so.
func TestEtcdCAReload(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA := testcerts.NewAuthority(t, "etcd-ca-1"), testcerts.NewAuthority(t, "etcd-ca-2")
	serverCert, serverKey := oldCA.WriteLeaf(t, dir, "etcd")
	endpoint := etcdtest.StartTLS(t, serverCert, serverKey)
	proxy := etcdtest.NewProxy(t, endpoint)
	log := &testlog.Buffer{}
	f := etcdFlags{endpoints: endpoint + "," + proxy.Addr(), ca: oldCA.WriteCA(t, dir, "ca")}
	cfg, err := f.tlsConfig(t.Context(), 0, hclog.New(&hclog.LoggerOptions{Output: log}))
	if err != nil {
		t.Fatal(err)
	}
	// handshake makes a new connection to etcd as the etcd client's do
	// (gRPC names the endpoint's host unless the config names one).
	handshake := func(serverName string) error {
		c := cfg.Clone()
		c.ServerName = serverName
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", endpoint, c)
		if err == nil {
			conn.Close()
		}
		return err
	}
	// The etcd client of a running host, which reconnects through proxy.
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{proxy.Addr()}, TLS: cfg, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	get := func(timeout time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, err := client.Get(ctx, "/ca-test")
		return err
	}
	if err := get(10 * time.Second); err != nil {
		t.Fatalf("etcd client with the CA of etcd's certificate: %v", err)
	}
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if err := handshake(name); err != nil {
			t.Fatalf("handshake naming %s: %v", name, err)
		}
	}

	// Another host name, by DNS name or by address: refused.
	if err := handshake("etcd.example"); err == nil || !strings.Contains(err.Error(), "not etcd.example") {
		t.Errorf("etcd's certificate for another DNS name: got %v, want it refused", err)
	}
	other := etcdFlags{endpoints: "127.0.0.2:2379", ca: f.ca}
	otherCfg, err := other.tlsConfig(t.Context(), 0, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	if conn, err := tls.Dial("tcp", endpoint, otherCfg); err == nil || !strings.Contains(err.Error(), "names none of the -etcd-endpoints") {
		if err == nil {
			conn.Close()
		}
		t.Errorf("etcd's certificate for another address: got %v, want it refused", err)
	}

	// etcd presents a certificate of a CA the client does not know yet:
	// refused, on new connections and on the client's reconnection.
	certPEM, keyPEM := newCA.Leaf(t, "etcd-renewed")
	testcerts.Write(t, serverKey, keyPEM)
	testcerts.Write(t, serverCert, certPEM)
	if err := handshake(""); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("etcd's certificate of an unknown CA: got %v, want it refused", err)
	}
	proxy.SetCut(true)
	proxy.SetCut(false)
	if err := get(time.Second); err == nil {
		t.Fatal("the etcd client reconnected to etcd with a certificate of an unknown CA")
	}

	// The CA file follows: the client reconnects, with no restart.
	testcerts.Write(t, f.ca, newCA.PEM)
	deadline := time.Now().Add(15 * time.Second)
	for get(time.Second) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("the etcd client did not reconnect within 15s of the CA's renewal; log:\n%s", log)
		}
	}

	// A bad CA file: logged, and the CA in force stays.
	testcerts.Write(t, f.ca, []byte("not a CA"))
	for !strings.Contains(log.String(), "etcd client TLS files not reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("a bad CA file was not logged; log:\n%s", log)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := handshake(""); err != nil {
		t.Fatalf("after a bad CA file: %v; want the previous CA in force", err)
	}
}

func TestEndpointIPs(t *testing.T) {
	got := endpointIPs([]string{"https://10.0.0.1:2379", "[::1]:2379", "etcd:2379", "http://etcd-2:2379", "192.168.0.9"})
	want := []net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("::1"), net.ParseIP("192.168.0.9")}
	if !slices.EqualFunc(got, want, net.IP.Equal) {
		t.Errorf("endpointIPs = %v, want %v", got, want)
	}
}
