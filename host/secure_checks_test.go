package host_test

import (
	"context"
	"crypto/tls"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/host"
	"github.com/loomrt/loom/internal/testkit/testlog"
)

// TestHostWarnsOfPlaintextTokens: ACLs without TLS on an address other
// machines can reach get one warning; on loopback, with TLS, or without
// ACLs, none.
func TestHostWarnsOfPlaintextTokens(t *testing.T) {
	secure, _ := secureFiles(t)
	aclOnly := []string{"-dev", "-acl-file", flagValue(t, secure, "-acl-file")}
	const warning = "ACL tokens travel in plaintext"
	for _, c := range []struct {
		name  string
		args  []string
		warns bool
	}{
		{"ACLs without TLS on every address", append(slices.Clone(aclOnly), "-grpc-addr", "0.0.0.0:0"), true},
		{"ACLs without TLS on loopback", append(slices.Clone(aclOnly), "-grpc-addr", "127.0.0.1:0"), false},
		{"ACLs with TLS on every address", append(slices.Clone(secure), "-grpc-addr", "0.0.0.0:0"), false},
		{"no ACLs on every address", []string{"-dev", "-grpc-addr", "0.0.0.0:0"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := startHost(t, c.args...)
			log := h.log.String() // the check runs before the host says it listens
			n := strings.Count(log, warning)
			if c.warns && (n != 1 || !strings.Contains(log, "[WARN]  testhost.acl: "+warning)) {
				t.Errorf("want one warning %q at WARN; log:\n%s", warning, log)
			}
			if !c.warns && n != 0 {
				t.Errorf("want no warning %q; log:\n%s", warning, log)
			}
		})
	}
}

// TestHostRefusesOutOfDateCertificate: a certificate that has expired, or
// is not valid yet, stops the host at start, with an error naming the file
// and the certificate's validity window.
func TestHostRefusesOutOfDateCertificate(t *testing.T) {
	args, _, ca := secureFilesWithCA(t)
	dir := t.TempDir()
	day := 24 * time.Hour
	from, until := time.Now().Add(-3*day), time.Now().Add(-day)
	for _, c := range []struct {
		name, want  string
		from, until time.Time
	}{
		{"expired", "has expired", from, until},
		{"early", "is not valid yet", from.Add(4 * day), until.Add(4 * day)},
	} {
		t.Run(c.name, func(t *testing.T) {
			cert, key := ca.LeafValid(t, c.name, c.from, c.until)
			args := slices.Clone(args)
			args[slices.Index(args, "-tls-cert")+1] = writeFile(t, dir, c.name+".pem", cert)
			args[slices.Index(args, "-tls-key")+1] = writeFile(t, dir, c.name+"-key.pem", key)
			args = append(args, "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0")
			log := &testlog.Buffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := host.Run(ctx, args, log, registerExamples)
			for _, part := range []string{filepath.Join(dir, c.name+".pem"), c.want, c.until.UTC().Format(time.RFC3339)} {
				if err == nil || !strings.Contains(err.Error(), part) {
					t.Fatalf("got %v, want an error with %q", err, part)
				}
			}
			if strings.Contains(log.String(), "listening") {
				t.Errorf("the host listened before failing:\n%s", log)
			}
		})
	}
}

// TestHostKeepsCertificateOverExpiredRenewal: a running host whose
// certificate file is replaced by an expired one keeps presenting the
// previous certificate, and logs an error naming the file.
func TestHostKeepsCertificateOverExpiredRenewal(t *testing.T) {
	args, clientTLS, ca := secureFilesWithCA(t)
	h := startHost(t, append(args, "-reload-interval", "20ms")...)
	certPEM, keyPEM := ca.LeafValid(t, "expired host", time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	certFile, keyFile := flagValue(t, args, "-tls-cert"), flagValue(t, args, "-tls-key")
	writeFile(t, filepath.Dir(keyFile), filepath.Base(keyFile), keyPEM)
	writeFile(t, filepath.Dir(certFile), filepath.Base(certFile), certPEM)

	deadline := time.Now().Add(10 * time.Second)
	for {
		// Handshakes read the files again (every -reload-interval at most).
		conn, err := tls.Dial("tcp", h.grpcAddr, clientTLS)
		if err != nil {
			t.Fatalf("a new connection after the expired renewal: %v\nlog:\n%s", err, h.log)
		}
		name := conn.ConnectionState().PeerCertificates[0].Subject.CommonName
		conn.Close()
		if name != "host" {
			t.Fatalf("new connections get the certificate %q, want the previous one (host)", name)
		}
		log := h.log.String()
		if i := strings.Index(log, "[ERROR] testhost.tls: TLS files not reloaded"); i >= 0 {
			line, _, _ := strings.Cut(log[i:], "\n")
			if !strings.Contains(line, certFile) || !strings.Contains(line, "has expired") {
				t.Errorf("the error line does not name the file and say it has expired: %s", line)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no error logged 10s after the certificate was replaced by an expired one; log:\n%s", log)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}
