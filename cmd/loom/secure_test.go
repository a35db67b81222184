package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/internal/testkit/testcerts"
	"github.com/loomrt/loom/proto/pbresource"
)

// testPKI writes a CA and a certificate with its key, for localhost and
// 127.0.0.1, signed by it, and returns the three files and a client TLS
// config presenting that same certificate.
func testPKI(t *testing.T) (caFile, certFile, keyFile string, client *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "test CA")
	caFile = ca.WriteCA(t, dir, "ca")
	certFile, keyFile = ca.WriteLeaf(t, dir, "loom")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	return caFile, certFile, keyFile, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "localhost", MinVersion: tls.VersionTLS12}
}

var httpListeningRE = regexp.MustCompile(`HTTP server listening: addr=(\S+)`)

// TestSecureServer runs `loom server` with mutual TLS, an ACL file and the
// HTTP endpoints (the host package tests them in depth).
func TestSecureServer(t *testing.T) {
	caFile, certFile, keyFile, clientTLS := testPKI(t)
	aclFile := filepath.Join(t.TempDir(), "acl.yaml")
	if err := os.WriteFile(aclFile, []byte(`tokens:
  - name: writer
    secret: "writer-secret"
    rules:
      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: write}
  - name: reader
    secret: "reader-secret"
    rules:
      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: read}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, log, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0",
		"-tls-cert", certFile, "-tls-key", keyFile, "-tls-client-ca", caFile, "-acl-file", aclFile)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(clientTLS)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pbresource.NewResourceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as := func(secret string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "x-consul-token", secret)
	}

	if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: barResource(t, "b", "B")}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Write without a token: got %v, want Unauthenticated", err)
	}
	if _, err := client.Write(as("reader-secret"), &pbresource.WriteRequest{Resource: barResource(t, "b", "B")}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("Write with a read token: got %v, want PermissionDenied", err)
	}
	wrote, err := client.Write(as("writer-secret"), &pbresource.WriteRequest{Resource: barResource(t, "b", "B")})
	if err != nil {
		t.Fatalf("Write with the write token: %v", err)
	}
	if _, err := client.Read(as("reader-secret"), &pbresource.ReadRequest{Id: wrote.Resource.Id}); err != nil {
		t.Errorf("Read with the read token: %v", err)
	}

	m := httpListeningRE.FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("no HTTP address in the log:\n%s", log)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rsp, err := http.Get("http://" + m[1] + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rsp.Body)
		rsp.Body.Close()
		if rsp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz = %d %q after 10s", rsp.StatusCode, strings.TrimSpace(string(body)))
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}

// TestCLIHintsTLSMismatch: a client without TLS talking to a TLS server,
// and one with TLS talking to a plaintext server, are told which flag to
// change, once, beside the error gRPC gives.
func TestCLIHintsTLSMismatch(t *testing.T) {
	caFile, certFile, keyFile, _ := testPKI(t)
	tlsAddr := startWidgetServer(t, "-tls-cert", certFile, "-tls-key", keyFile)
	plainAddr := startWidgetServer(t)
	loom := func(args ...string) (string, int) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := exitCode(run(context.Background(), args, &stdout, &stderr), &stderr)
		return stderr.String(), code
	}
	const toTLS = "loom: hint: the server may expect TLS: give -tls-ca FILE"
	const toPlain = "loom: hint: the server speaks plaintext: leave out the -tls-* flags"

	for _, cmd := range [][]string{{"list", "clitest.v1.Widget"}, {"read", "clitest.v1.Widget", "w"}, {"delete", "clitest.v1.Widget", "w"}} {
		errOut, code := loom(append(cmd, "-addr", tlsAddr, "-timeout", "5s")...)
		if code != 1 || !strings.Contains(errOut, "server preface") || strings.Count(errOut, toTLS) != 1 {
			t.Errorf("loom %s in plaintext to a TLS server: exit %d, stderr %q; want 1, gRPC's error and the -tls-ca hint", cmd[0], code, errOut)
		}
	}
	errOut, code := loom("watch", "clitest.v1.Widget", "-addr", tlsAddr, "-timeout", "1s")
	if code != 0 || strings.Count(errOut, "watching again") < 2 || strings.Count(errOut, toTLS) != 1 {
		t.Errorf("loom watch in plaintext to a TLS server: exit %d, stderr %q; want retries and the hint once", code, errOut)
	}

	errOut, code = loom("list", "clitest.v1.Widget", "-addr", plainAddr, "-tls-ca", caFile, "-timeout", "5s")
	if code != 1 || !strings.Contains(errOut, "first record does not look like a TLS handshake") || !strings.Contains(errOut, toPlain) {
		t.Errorf("loom list with TLS to a plaintext server: exit %d, stderr %q; want 1 and the hint to leave TLS out", code, errOut)
	}
	// The hint is for a mismatch only: a server's own answer has none,
	// nor does a matching TLS connection.
	for _, args := range [][]string{
		{"list", "clitest.v1.Nope", "-addr", plainAddr},
		{"list", "clitest.v1.Nope", "-addr", tlsAddr, "-tls-ca", caFile},
	} {
		if errOut, code := loom(args...); code != 1 || !strings.HasPrefix(errOut, "loom: InvalidArgument: ") || strings.Contains(errOut, "hint") {
			t.Errorf("loom %v: exit %d, stderr %q; want the server's InvalidArgument and no hint", args, code, errOut)
		}
	}
}
