package dial_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/dial"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/testcerts"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/inmem"
)

const aclFile = `tokens:
  - name: writer
    secret: "writer-secret"
    rules:
      - {type: "foo.*.*", partition: "*", namespace: "*", access: write}
`

// serve starts a ResourceService with the example types and an ACL file on
// a loopback listener, over TLS when tlsConfig is set, and returns its
// address.
func serve(t *testing.T, tlsConfig *grpc.ServerOption) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "acl.yaml")
	require.NoError(t, os.WriteFile(path, []byte(aclFile), 0o600))
	src, err := acl.NewSource(path, nil)
	require.NoError(t, err)
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	svc := server.New(server.Config{Backend: inmem.New(), Registry: reg, ACLResolver: server.TrustInProcess(src.Resolve)})
	opts := svc.ServerOptions()
	if tlsConfig != nil {
		opts = append(opts, *tlsConfig)
	}
	gs := grpc.NewServer(opts...)
	svc.Register(gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func write(t *testing.T, conn *grpc.ClientConn) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	data, err := anypb.New(&pbfoov1.Zip{Zap: "z"})
	require.NoError(t, err)
	_, err = pbresource.NewResourceServiceClient(conn).Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id: &pbresource.ID{Type: foo.ZipType, Name: "z"}, Data: data,
	}})
	return err
}

func TestDialWithTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "ca")
	crt, key := ca.WriteLeaf(t, dir, "server")
	sc, err := certs.ServerConfig(certs.Files{Cert: crt, Key: key})
	require.NoError(t, err)
	creds := grpc.Creds(credentials.NewTLS(sc))
	addr := serve(t, &creds)
	caFile := ca.WriteCA(t, dir, "ca")

	conn, err := dial.Dial(addr, dial.WithTLS(certs.Files{CA: caFile}), dial.WithToken("writer-secret"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, write(t, conn))

	anon, err := dial.Dial(addr, dial.WithTLS(certs.Files{CA: caFile}))
	require.NoError(t, err)
	defer anon.Close()
	require.Equal(t, codes.Unauthenticated, status.Code(write(t, anon)))

	other := testcerts.NewAuthority(t, "other")
	wrongCA, err := dial.Dial(addr, dial.WithTLS(certs.Files{CA: other.WriteCA(t, dir, "other")}), dial.WithToken("writer-secret"))
	require.NoError(t, err)
	defer wrongCA.Close()
	require.Equal(t, codes.Unavailable, status.Code(write(t, wrongCA)), "a server the CA did not sign is refused")
}

func TestDialPlaintextNeedsSayingSo(t *testing.T) {
	addr := serve(t, nil)
	_, err := dial.Dial(addr, dial.WithToken("writer-secret"))
	require.ErrorContains(t, err, "WithTLS")
	_, err = dial.Dial(addr, dial.WithInsecure(), dial.WithTLS(certs.Files{}))
	require.ErrorContains(t, err, "choose one")

	conn, err := dial.Dial(addr, dial.WithInsecure(), dial.WithToken("writer-secret"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, write(t, conn), "WithInsecure lets the token travel in plaintext")
}

func TestDialMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "ca")
	caFile := ca.WriteCA(t, dir, "ca")
	crt, key := ca.WriteLeaf(t, dir, "server")
	sc, err := certs.ServerConfig(certs.Files{Cert: crt, Key: key, CA: caFile})
	require.NoError(t, err)
	creds := grpc.Creds(credentials.NewTLS(sc))
	addr := serve(t, &creds)

	ccrt, ckey := ca.WriteLeaf(t, dir, "controller")
	conn, err := dial.Dial(addr, dial.WithTLS(certs.Files{CA: caFile, Cert: ccrt, Key: ckey}), dial.WithToken("writer-secret"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, write(t, conn))

	noCert, err := dial.Dial(addr, dial.WithTLS(certs.Files{CA: caFile}), dial.WithToken("writer-secret"))
	require.NoError(t, err)
	defer noCert.Close()
	require.Error(t, write(t, noCert), "a client without a certificate is refused")
}
