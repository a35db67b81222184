package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCertsWorkWithServerAndCLI: the files `loom certs` writes serve
// `loom server`'s mutual TLS, and the CLI connects with them; a client
// certificate added later by a second run is signed by the same CA.
func TestCertsWorkWithServerAndCLI(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	loom := func(args ...string) (stdout, stderr string, code int) {
		t.Helper()
		var o, e bytes.Buffer
		code = exitCode(run(context.Background(), args, &o, &e), &e)
		return o.String(), e.String(), code
	}
	if out, errOut, code := loom("certs", "-dir", dir); code != 0 || strings.Count(out, "\n") != 6 {
		t.Fatalf("loom certs: exit %d, stdout %q, stderr %q; want 0 and the six files written", code, out, errOut)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	if fi, err := os.Stat(f("ca.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("ca.key: %v, %v; want mode 0600", fi, err)
	}
	addr := startWidgetServer(t, "-tls-cert", f("server.crt"), "-tls-key", f("server.key"), "-tls-client-ca", f("ca.crt"))

	if _, errOut, code := loom("list", "clitest.v1.Widget", "-addr", addr, "-tls-ca", f("ca.crt"), "-tls-cert", f("client.crt"), "-tls-key", f("client.key")); code != 0 {
		t.Errorf("loom list with the client certificate: exit %d, stderr %q; want 0", code, errOut)
	}
	const needCert = "loom: hint: the server may require a client certificate: give -tls-cert FILE and -tls-key FILE"
	if _, errOut, code := loom("list", "clitest.v1.Widget", "-addr", addr, "-tls-ca", f("ca.crt"), "-timeout", "5s"); code != 1 || !strings.Contains(errOut, needCert) {
		t.Errorf("loom list without a client certificate: exit %d, stderr %q; want 1 and the hint to give one", code, errOut)
	}
	other := filepath.Join(t.TempDir(), "other")
	if _, errOut, code := loom("certs", "-dir", other, "-clients", ""); code != 0 {
		t.Fatalf("loom certs -dir other: exit %d, stderr %q", code, errOut)
	}
	const wrongCA = "loom: hint: -tls-ca FILE must be the CA that signed the server's certificate"
	if _, errOut, code := loom("list", "clitest.v1.Widget", "-addr", addr, "-tls-ca", filepath.Join(other, "ca.crt"), "-tls-cert", f("client.crt"), "-tls-key", f("client.key"), "-timeout", "5s"); code != 1 || !strings.Contains(errOut, wrongCA) {
		t.Errorf("loom list trusting another CA: exit %d, stderr %q; want 1 and the hint about -tls-ca", code, errOut)
	}

	// A second run keeps the CA and the existing certificates, and adds ci.
	caBefore, _ := os.ReadFile(f("ca.crt"))
	out, errOut, code := loom("certs", "-dir", dir, "-clients", "client,ci")
	if code != 0 || out != f("ci.crt")+"\n"+f("ci.key")+"\n" {
		t.Fatalf("loom certs again: exit %d, stdout %q, stderr %q; want only ci's files written", code, out, errOut)
	}
	if caAfter, _ := os.ReadFile(f("ca.crt")); !bytes.Equal(caBefore, caAfter) {
		t.Error("a second loom certs replaced the CA")
	}
	if _, errOut, code := loom("list", "clitest.v1.Widget", "-addr", addr, "-tls-ca", f("ca.crt"), "-tls-cert", f("ci.crt"), "-tls-key", f("ci.key")); code != 0 {
		t.Errorf("loom list with the added client certificate: exit %d, stderr %q; want 0", code, errOut)
	}
}
