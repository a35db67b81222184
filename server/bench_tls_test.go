package server

import (
	"net"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/dial"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/testcerts"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// benchToken is the secret of the write token of the benchmarks' ACL file.
const benchToken = "bench-widget-writer-secret"

// benchACL is an ACL file of three tokens, the benchmarks' own last, whose
// write rule on bench.v1.Widget is the second of its rules: a lookup that
// does a little work, as a real file's would.
const benchACL = `tokens:
  - name: reader
    secret: "bench-reader-secret"
    rules:
      - {type: "foo.*.*", partition: "*", namespace: "*", access: read}
  - name: other-writer
    secret: "bench-other-writer-secret"
    rules:
      - {type: "foo.v1.Bar", partition: "default", namespace: "*", access: write}
  - name: widget-writer
    secret: "` + benchToken + `"
    rules:
      - {type: "foo.*.*", partition: "*", namespace: "*", access: read}
      - {type: "bench.v1.Widget", partition: "default", namespace: "*", access: write}
`

// benchTLSTokenEnv is benchEnv's "grpc-tls-token" transport: a server whose
// ACL resolver is an acl.Source (wrapped in TrustInProcess, as a host does)
// over an ACL file naming benchToken, served by a grpc.Server with TLS
// credentials from certs.ServerConfig, and a client from dial.Dial with
// WithTLS and WithToken. It is what a remote controller of a host with
// -tls-cert, -tls-key and -acl-file costs, next to the plaintext "grpc".
func benchTLSTokenEnv(b testing.TB) (*testEnv, pbresource.ResourceServiceClient, func()) {
	b.Helper()
	dir := b.TempDir()
	ca := testcerts.NewAuthority(b, "bench-ca")
	caFile := ca.WriteCA(b, dir, "ca")
	certFile, keyFile := ca.WriteLeaf(b, dir, "server")
	aclFile := testcerts.Write(b, filepath.Join(dir, "acl.yaml"), []byte(benchACL))

	src, err := acl.NewSource(aclFile, nil)
	if err != nil {
		b.Fatal(err)
	}
	env := newEnv(b, withACL(TrustInProcess(src.Resolve)))
	registerWidget(env)

	tlsConf, err := certs.ServerConfig(certs.Files{Cert: certFile, Key: keyFile})
	if err != nil {
		b.Fatal(err)
	}
	opts := append(env.server.ServerOptions(), grpc.Creds(credentials.NewTLS(tlsConf)))
	gs := grpc.NewServer(opts...)
	env.server.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = gs.Serve(lis) }()
	conn, err := dial.Dial(lis.Addr().String(), dial.WithTLS(certs.Files{CA: caFile}), dial.WithToken(benchToken))
	if err != nil {
		gs.Stop()
		b.Fatal(err)
	}
	return env, pbresource.NewResourceServiceClient(conn), func() {
		_ = conn.Close()
		gs.Stop()
	}
}

// TestTLSTokenTransport checks that W7's "grpc-tls-token" transport
// measures what it says: its client's token may write widgets, and the
// server checks it (another token may not, and no token is refused).
func TestTLSTokenTransport(t *testing.T) {
	env, client, stop := benchTLSTokenEnv(t)
	t.Cleanup(stop)
	ctx := testCtx(t)
	_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: widgetID("w"), Data: mustAny(t, &pbfoov1.Zip{Zap: "z"})}})
	require.NoError(t, err)
	_, err = client.Read(ctx, &pbresource.ReadRequest{Id: widgetID("w")})
	require.NoError(t, err)

	// The connection's token is sent with every call; a second one in
	// the metadata would be ambiguous, so ask the server directly.
	for token, code := range map[string]codes.Code{"": codes.Unauthenticated, "bench-reader-secret": codes.PermissionDenied} {
		md := metadata.MD{}
		if token != "" {
			md.Set(resource.TokenMetadataKey, token)
		}
		_, err := env.server.Read(metadata.NewIncomingContext(ctx, md), &pbresource.ReadRequest{Id: widgetID("w")})
		requireCode(t, err, code)
	}
}
