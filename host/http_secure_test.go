package host_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/internal/testkit/testcerts"
)

// leafOf parses the certificate in certPEM.
func leafOf(t *testing.T, certPEM []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestHostHTTPTLSAndToken: with -http-tls the endpoints serve HTTPS with
// -tls-cert (no client certificate asked for); with -http-token-file
// /metrics wants the token and the probes do not. /metrics has the
// certificates' expiry, which a renewal updates, and the renewal is
// logged with its serial and expiry.
func TestHostHTTPTLSAndToken(t *testing.T) {
	args, _, ca := secureFilesWithCA(t)
	dir := t.TempDir()
	token := testcerts.Write(t, filepath.Join(dir, "token"), []byte("metrics-secret\n"))
	h := startHost(t, append(args, "-http-tls", "-http-token-file", token, "-pprof", "-reload-interval", "20ms")...)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	defer client.CloseIdleConnections()
	get := func(path, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+h.httpAddr+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		rsp, err := client.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer rsp.Body.Close()
		body, _ := io.ReadAll(rsp.Body)
		return rsp.StatusCode, string(body)
	}

	if rsp, err := http.Get("http://" + h.httpAddr + "/healthz"); err == nil {
		rsp.Body.Close()
		if rsp.StatusCode == http.StatusOK {
			t.Error("/healthz over plaintext HTTP answered 200 with -http-tls")
		}
	}
	if code, _ := get("/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz over TLS without a token = %d, want 200", code)
	}
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		if code, body := get(path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without the token = %d %q, want 401", path, code, body)
		}
		if code, _ := get(path, "wrong"); code != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token = %d, want 401", path, code)
		}
	}
	code, metrics := get("/metrics", "metrics-secret")
	if code != http.StatusOK {
		t.Fatalf("/metrics with the token = %d", code)
	}
	caCert := leafOf(t, ca.PEM) // -tls-client-ca holds the CA alone
	for _, want := range []string{
		fmt.Sprintf("loom_tls_cert_expiry_timestamp_seconds{cert=\"client_ca\"} %s\n", expFloat(caCert.NotAfter)),
		`loom_tls_cert_expiry_timestamp_seconds{cert="server"} `,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Renewed: logged with its serial and expiry, and on /metrics, with no
	// handshake to trigger the reload.
	notAfter := time.Now().Add(50 * time.Hour).Truncate(time.Second)
	renewed, key := ca.LeafValid(t, "host", time.Now().Add(-time.Hour), notAfter)
	testcerts.Write(t, flagValue(t, args, "-tls-key"), key)
	testcerts.Write(t, flagValue(t, args, "-tls-cert"), renewed)
	serial := leafOf(t, renewed).SerialNumber.Text(16)
	reloaded := regexp.MustCompile(`TLS certificate reloaded: cert=\S+ serial=` + serial + ` not_after=`)
	deadline := time.Now().Add(10 * time.Second)
	for !reloaded.MatchString(h.log.String()) {
		if time.Now().After(deadline) {
			t.Fatalf("no log line matching %q within 10s; log:\n%s", reloaded, h.log)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	want := fmt.Sprintf("loom_tls_cert_expiry_timestamp_seconds{cert=\"server\"} %s\n", expFloat(notAfter))
	if _, metrics = get("/metrics", "metrics-secret"); !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %q after the renewal", want)
	}

	// The token file replaced: within -reload-interval the new token is in
	// force and the old one refused, with no restart.
	testcerts.Write(t, token, []byte("renewed-secret"))
	deadline = time.Now().Add(10 * time.Second)
	for {
		oldCode, _ := get("/metrics", "metrics-secret")
		newCode, _ := get("/metrics", "renewed-secret")
		if oldCode == http.StatusUnauthorized && newCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10s after the token file changed: the old token gets %d, the new %d; want 401 and 200", oldCode, newCode)
		}
	}
}

// expFloat is t as Prometheus's text format writes a gauge of its Unix
// seconds.
func expFloat(t time.Time) string {
	return fmt.Sprintf("%g", float64(t.Unix()))
}
