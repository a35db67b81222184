package host_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/host"
	"github.com/loomrt/loom/internal/testkit/testcerts"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
)

const testACL = `tokens:
  - name: writer
    secret: "writer-secret"
    rules:
      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: write}
  - name: reader
    secret: "reader-secret"
    rules:
      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: read}
      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: list}
  - name: team-a
    secret: "team-a-secret"
    rules:
      - {type: "foo.v1.Bar", partition: "*", namespace: "*", access: list}
      - {type: "foo.v1.Bar", partition: "default", namespace: "team-a", access: read}
`

func bar(t *testing.T, namespace, name, baz string) *pbresource.Resource {
	t.Helper()
	data, err := anypb.New(&pbfoov1.Bar{Baz: baz})
	if err != nil {
		t.Fatal(err)
	}
	return &pbresource.Resource{
		Id: &pbresource.ID{
			Type:    foo.BarV1Type,
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: namespace},
			Name:    name,
		},
		Data: data,
	}
}

// secureFiles writes a CA, the host's certificate and key, a client's, and
// the ACL file, and returns the host's flags and the client's TLS config.
func secureFiles(t *testing.T) (args []string, clientTLS *tls.Config) {
	t.Helper()
	args, clientTLS, _ = secureFilesWithCA(t)
	return args, clientTLS
}

// secureFilesWithCA is secureFiles that also returns the CA, to sign a
// renewed certificate with.
func secureFilesWithCA(t *testing.T) (args []string, clientTLS *tls.Config, ca *testcerts.Authority) {
	t.Helper()
	dir := t.TempDir()
	ca = testcerts.NewAuthority(t, "test CA")
	srvCert, srvKey := ca.Leaf(t, "host")
	cliCert, cliKey := ca.Leaf(t, "client")
	args = []string{
		"-dev",
		"-tls-cert", writeFile(t, dir, "host.pem", srvCert),
		"-tls-key", writeFile(t, dir, "host-key.pem", srvKey),
		"-tls-client-ca", writeFile(t, dir, "ca.pem", ca.PEM),
		"-acl-file", writeFile(t, dir, "acl.yaml", []byte(testACL)),
	}
	pair, err := tls.X509KeyPair(cliCert, cliKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	return args, &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "localhost", MinVersion: tls.VersionTLS12}, ca
}

// flagValue returns the value that follows name in args.
func flagValue(t *testing.T, args []string, name string) string {
	t.Helper()
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	t.Fatalf("no %s in %v", name, args)
	return ""
}

// TestHostReloadsFiles changes the ACL file and renews the certificate of a
// running host: a token added to the file is accepted, and new connections
// get the renewed certificate, with no restart.
func TestHostReloadsFiles(t *testing.T) {
	args, clientTLS, ca := secureFilesWithCA(t)
	h := startHost(t, append(args, "-reload-interval", "20ms")...)
	client := dialTLS(t, h.grpcAddr, clientTLS)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	late := metadata.AppendToOutgoingContext(ctx, "x-consul-token", "late-secret")

	_, err := client.Write(late, &pbresource.WriteRequest{Resource: bar(t, "team-a", "late", "L")})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("Write with a token not yet in the file: got %v, want Unauthenticated", err)
	}
	aclFile := flagValue(t, args, "-acl-file")
	writeFile(t, filepath.Dir(aclFile), filepath.Base(aclFile), []byte(testACL+`  - name: late
    secret: "late-secret"
    rules:
      - {type: "foo.*.*", partition: "*", namespace: "*", access: write}
`))
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err = client.Write(late, &pbresource.WriteRequest{Resource: bar(t, "team-a", "late", "L")})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token added to the ACL file is still refused after 10s: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}

	// Renew the host's certificate in place.
	certPEM, keyPEM := ca.Leaf(t, "renewed host")
	certFile, keyFile := flagValue(t, args, "-tls-cert"), flagValue(t, args, "-tls-key")
	writeFile(t, filepath.Dir(keyFile), filepath.Base(keyFile), keyPEM)
	writeFile(t, filepath.Dir(certFile), filepath.Base(certFile), certPEM)
	for {
		conn, err := tls.Dial("tcp", h.grpcAddr, clientTLS)
		if err == nil {
			name := conn.ConnectionState().PeerCertificates[0].Subject.CommonName
			conn.Close()
			if name == "renewed host" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("new connections still get the old certificate after 10s (last error %v)", err)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config) pbresource.ResourceServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pbresource.NewResourceServiceClient(conn)
}

// TestSecureHost runs a host with mutual TLS and an ACL file and calls it
// as the tokens of the file, and as clients it must refuse.
func TestSecureHost(t *testing.T) {
	args, clientTLS := secureFiles(t)
	h := startHost(t, args...)
	client := dialTLS(t, h.grpcAddr, clientTLS)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	as := func(secret string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "x-consul-token", secret)
	}

	// No token, or one the file does not name: Unauthenticated.
	_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "team-a", "a1", "A")})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("Write without a token: got %v, want Unauthenticated", err)
	}
	_, err = client.Write(as("no-such-secret"), &pbresource.WriteRequest{Resource: bar(t, "team-a", "a1", "A")})
	if status.Code(err) != codes.Unauthenticated {
		t.Errorf("Write with an unknown token: got %v, want Unauthenticated", err)
	}
	// A read-only token cannot write.
	_, err = client.Write(as("reader-secret"), &pbresource.WriteRequest{Resource: bar(t, "team-a", "a1", "A")})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("Write with a read token: got %v, want PermissionDenied", err)
	}
	// A write token can.
	var a1 *pbresource.Resource
	for _, r := range []*pbresource.Resource{bar(t, "team-a", "a1", "A"), bar(t, "team-b", "b1", "B")} {
		rsp, err := client.Write(as("writer-secret"), &pbresource.WriteRequest{Resource: r})
		if err != nil {
			t.Fatalf("Write %s with the write token: %v", r.Id.Name, err)
		}
		if a1 == nil {
			a1 = rsp.Resource
		}
	}

	// The host's own controllers are not blocked by the ACLs: the example
	// Bar controller writes its status.
	for {
		rsp, err := client.Read(as("reader-secret"), &pbresource.ReadRequest{Id: a1.Id})
		if err != nil {
			t.Fatalf("Read with the read token: %v", err)
		}
		if rsp.Resource.GetStatus()["foo.bar"].GetObservedGeneration() == rsp.Resource.GetGeneration() {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the in-process bar controller never wrote its status; last read %v\nlog:\n%s", rsp.Resource, h.log)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}

	// List returns only what the token may read, not an error.
	list := func(secret string) []string {
		rsp, err := client.List(as(secret), &pbresource.ListRequest{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}})
		if err != nil {
			t.Fatalf("List as %s: %v", secret, err)
		}
		var names []string
		for _, r := range rsp.Resources {
			names = append(names, r.Id.Name)
		}
		slices.Sort(names)
		return names
	}
	if got := list("team-a-secret"); !slices.Equal(got, []string{"a1"}) {
		t.Errorf("List as team-a = %v, want only [a1]", got)
	}
	if got := list("reader-secret"); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Errorf("List as reader = %v, want [a1 b1]", got)
	}

	// A TLS client without a certificate is refused (mutual TLS), and so
	// is a plaintext one.
	noCert := clientTLS.Clone()
	noCert.Certificates = nil
	short, cancelShort := context.WithTimeout(ctx, 5*time.Second)
	defer cancelShort()
	if _, err := dialTLS(t, h.grpcAddr, noCert).Read(metadata.AppendToOutgoingContext(short, "x-consul-token", "writer-secret"),
		&pbresource.ReadRequest{Id: a1.Id}); status.Code(err) != codes.Unavailable {
		t.Errorf("a client without a certificate: got %v, want the connection refused (Unavailable)", err)
	}
	conn, err := grpc.NewClient(h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pbresource.NewResourceServiceClient(conn).Read(metadata.AppendToOutgoingContext(short, "x-consul-token", "writer-secret"),
		&pbresource.ReadRequest{Id: a1.Id}); status.Code(err) != codes.Unavailable {
		t.Errorf("a plaintext client: got %v, want the connection refused (Unavailable)", err)
	}

	if err := h.stop(); err != nil {
		t.Fatalf("stopping: %v\nlog:\n%s", err, h.log)
	}
	// Each refusal has an audit line naming the token, never its secret.
	for _, line := range []string{
		`request denied: method=/hashicorp.consul.resource.ResourceService/Write code=Unauthenticated token="(none)"`,
		`request denied: method=/hashicorp.consul.resource.ResourceService/Write code=Unauthenticated token="(unknown)"`,
		`request denied: method=/hashicorp.consul.resource.ResourceService/Write code=PermissionDenied token=reader`,
	} {
		if !strings.Contains(h.log.String(), line) {
			t.Errorf("the log lacks %q:\n%s", line, h.log)
		}
	}
	for _, secret := range []string{"writer-secret", "reader-secret", "team-a-secret"} {
		if strings.Contains(h.log.String(), secret) {
			t.Errorf("the log shows the secret %q:\n%s", secret, h.log)
		}
	}
}

// TestHostRefusesBadFiles: a malformed ACL file or a missing certificate
// file stops the host at start, with a message naming the file; it never
// serves.
func TestHostRefusesBadFiles(t *testing.T) {
	args, _ := secureFiles(t)
	dir := t.TempDir()
	badACL := writeFile(t, dir, "bad-acl.yaml", []byte("tokens:\n  - name: x\n    secret: s\n    rules:\n      - {type: \"foo.v1.Bar\", access: fly}\n"))
	missing := dir + "/missing-cert.pem"
	withFlag := func(name, value string) []string {
		out := slices.Clone(args)
		i := slices.Index(out, name)
		out[i+1] = value
		return append(out, "-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0")
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"malformed ACL file", withFlag("-acl-file", badACL), badACL},
		{"missing ACL file", withFlag("-acl-file", dir+"/no-acl.yaml"), dir + "/no-acl.yaml"},
		{"missing certificate", withFlag("-tls-cert", missing), missing},
		{"missing client CA", withFlag("-tls-client-ca", dir+"/no-ca.pem"), dir + "/no-ca.pem"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := &testlog.Buffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := host.Run(ctx, tc.args, log, registerExamples)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s", err, tc.want)
			}
			if strings.Contains(log.String(), "listening") {
				t.Errorf("the host listened before failing:\n%s", log)
			}
		})
	}
	// Flags that do not go together are usage errors.
	for _, bad := range [][]string{
		{"-dev", "-tls-cert", "c.pem"},
		{"-dev", "-tls-client-ca", "ca.pem"},
		{"-dev", "-pprof", "-http-addr", ""},
	} {
		err := host.Run(context.Background(), bad, io.Discard, registerExamples)
		var usage host.UsageError
		if err == nil || !errors.As(err, &usage) {
			t.Errorf("%v: got %v, want a usage error", bad, err)
		}
	}
}
