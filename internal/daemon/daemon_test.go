package daemon

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/internal/testkit/testcerts"
)

// TestHTTPSIdleConnectionsMakeRoom: over TLS as over plaintext, a
// keep-alive connection that is idle makes room for a new one when the
// server holds its most.
func TestHTTPSIdleConnectionsMakeRoom(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "ca")
	certFile, keyFile := ca.WriteLeaf(t, dir, "localhost")
	cfg, err := certs.ServerConfig(certs.Files{Cert: certFile, Key: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ListenHTTP("127.0.0.1:0", 1)
	if err != nil {
		t.Fatal(err)
	}
	srv.UseTLS(cfg)
	srv.Serve(hclog.NewNullLogger())
	defer srv.Stop(5*time.Second, hclog.NewNullLogger())

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	newClient := func() *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	}
	get := func(c *http.Client) error {
		rsp, err := c.Get("https://" + srv.Addr() + "/healthz")
		if err != nil {
			return err
		}
		defer rsp.Body.Close()
		_, err = io.Copy(io.Discard, rsp.Body)
		return err
	}
	first, second := newClient(), newClient()
	defer first.CloseIdleConnections()
	defer second.CloseIdleConnections()
	if err := get(first); err != nil {
		t.Fatalf("first client: %v", err)
	}
	// The first client's connection is kept alive, and idle once the
	// server is done with the request: the second takes its place.
	for deadline := time.Now().Add(5 * time.Second); srv.Conns().Stats().Idle != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("the first connection was not marked idle within 5s: %+v", srv.Conns().Stats())
		}
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
	if err := get(second); err != nil {
		t.Fatalf("second client, with the first's connection idle: %v", err)
	}
}
