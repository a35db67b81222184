package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLeaderOverTLSWithToken: `loom leader` reads the HTTP endpoints of a
// server with -http-tls and -http-token-file given the CA and the token;
// without the token it says what the server answered, and that no server
// that answered leads.
func TestLeaderOverTLSWithToken(t *testing.T) {
	caFile, certFile, keyFile, _ := testPKI(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("scrape-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, log, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0", "-tls-cert", certFile, "-tls-key", keyFile,
		"-http-tls", "-http-token-file", tokenFile)
	url := "https://" + httpAddrOf(t, log)

	out := waitLeader(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(url)+` +inmem +yes$`),
		"-http-ca", caFile, "-http-token-file", tokenFile, url)
	if !strings.HasPrefix(out, "SERVER ") {
		t.Errorf("no header line:\n%s", out)
	}

	var stdout, stderr strings.Builder
	err := run(context.Background(), []string{"leader", "-http-ca", caFile, url}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "no server that answered leads") {
		t.Errorf("without the token: error %v, want one saying no server that answered leads", err)
	}
	if !strings.Contains(stdout.String(), "401 Unauthorized (give -http-token-file") {
		t.Errorf("without the token, the output does not say what the server answered:\n%s", stdout.String())
	}
	if err := run(context.Background(), []string{"leader"}, &stdout, &stderr); exitCode(err, &stderr) != 2 {
		t.Errorf("leader without addresses: %v, want a usage error", err)
	}
}
