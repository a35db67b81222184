package host_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// revokedACL is testACL with the reader token removed and team-a's
// narrowed to Zips; the writer's is unchanged.
const revokedACL = `tokens:
  - name: writer
    secret: "writer-secret"
    rules:
      - {type: "foo.*.Bar", partition: "*", namespace: "*", access: write}
  - name: team-a
    secret: "team-a-secret"
    rules:
      - {type: "foo.v1.Zip", partition: "*", namespace: "*", access: list}
`

// TestHostEndsRevokedWatches edits the ACL file of a running host (on
// both backends) under open watches: the watch of the token removed ends
// Unauthenticated, that of the token narrowed PermissionDenied, both
// within a few reload intervals; the watch of the token left alone goes
// on.
func TestHostEndsRevokedWatches(t *testing.T) {
	for _, backend := range []string{"inmem", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			aclFile := writeFile(t, dir, "acl.yaml", []byte(testACL))
			args := []string{"-acl-file", aclFile, "-reload-interval", "20ms"}
			if backend == "etcd" {
				args = append(args, "-storage", "etcd", "-etcd-endpoints", etcdtest.Start(t), "-etcd-prefix", "/revoked")
			} else {
				args = append(args, "-dev")
			}
			h := startHost(t, args...)
			conn, err := grpc.NewClient(h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			client := pbresource.NewResourceServiceClient(conn)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			as := func(secret string) context.Context {
				return metadata.AppendToOutgoingContext(ctx, "x-consul-token", secret)
			}
			watch := func(secret string) grpc.ServerStreamingClient[pbresource.WatchEvent] {
				t.Helper()
				stream, err := client.WatchList(as(secret), &pbresource.WatchListRequest{
					Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"},
				})
				if err != nil {
					t.Fatal(err)
				}
				if ev, err := stream.Recv(); err != nil || ev.GetEndOfSnapshot() == nil {
					t.Fatalf("watch as %s: got %v, %v; want EndOfSnapshot", secret, ev, err)
				}
				return stream
			}
			kept, removed, narrowed := watch("writer-secret"), watch("reader-secret"), watch("team-a-secret")

			writeFile(t, filepath.Dir(aclFile), filepath.Base(aclFile), []byte(revokedACL))
			deadline := time.Now().Add(10 * time.Second)
			for name, c := range map[string]struct {
				stream grpc.ServerStreamingClient[pbresource.WatchEvent]
				want   codes.Code
			}{"removed": {removed, codes.Unauthenticated}, "narrowed": {narrowed, codes.PermissionDenied}} {
				ev, err := c.stream.Recv() // ends within ctx's deadline
				if status.Code(err) != c.want {
					t.Fatalf("the %s token's watch: got %v, %v; want %v", name, ev, err, c.want)
				}
			}
			if time.Now().After(deadline) {
				t.Errorf("the watches ended more than 10s after the ACL file changed")
			}

			if _, err := client.Write(as("writer-secret"), &pbresource.WriteRequest{Resource: bar(t, "team-a", "after", "A")}); err != nil {
				t.Fatal(err)
			}
			ev, err := kept.Recv()
			if err != nil || ev.GetUpsert().GetResource().GetId().GetName() != "after" {
				t.Fatalf("the unchanged token's watch after the reload: got %v, %v; want the upsert of after\nlog:\n%s", ev, err, h.log)
			}
		})
	}
}
