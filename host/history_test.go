package host_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// The host serves the history service beside the ResourceService; with
// -history-versions 0 it keeps no history and serves no history service.
func TestHostServesHistory(t *testing.T) {
	for _, backend := range historyBackends {
		endpoints := startBackend(t, backend) // one etcd for the three hosts
		for _, tc := range []struct {
			flag string // -history-versions
			want int    // revisions of a resource written twice and deleted
		}{
			{flag: "20", want: 3},
			{flag: "1", want: 2}, // the last write and the deletion
			{flag: "0", want: 0},
		} {
			t.Run(backend+"/"+tc.flag, func(t *testing.T) {
				h := startHost(t, append(backendArgs(endpoints, "/history-"+tc.flag), "-history-versions", tc.flag)...)
				conn := dialPlain(t, h.grpcAddr)
				client := pbresource.NewResourceServiceClient(conn)
				id := zipID("z")
				var last *pbresource.Resource
				for _, zap := range []string{"one", "two"} {
					data, err := anypb.New(&pbfoov1.Zip{Zap: zap})
					require.NoError(t, err)
					out, err := client.Write(t.Context(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}})
					require.NoError(t, err)
					last = out.Resource
				}
				_, err := client.Delete(t.Context(), &pbresource.DeleteRequest{Id: last.Id})
				require.NoError(t, err)
				history := pbhistoryv1.NewHistoryServiceClient(conn)
				if tc.want == 0 {
					_, err := history.ListRevisions(t.Context(), &pbhistoryv1.ListRevisionsRequest{Id: id})
					require.Equal(t, codes.Unimplemented, status.Code(err), "history off: %v", err)
					return
				}
				count := func() int {
					revs, err := history.ListRevisions(t.Context(), &pbhistoryv1.ListRevisionsRequest{Id: id})
					require.NoError(t, err)
					return len(revs.Revisions)
				}
				// Pruning runs in the background: wait for the bound.
				require.Eventually(t, func() bool { return count() == tc.want }, 10*time.Second, 10*time.Millisecond,
					"revisions: %d, want %d", count(), tc.want)
			})
		}
	}
}

// Restoring an owner with what its deletion cascaded, through the host and
// its reaper: every node of a 3-level tree comes back, each owned by its
// restored owner's new Uid.
func TestHostRestoresTree(t *testing.T) {
	for _, backend := range historyBackends {
		t.Run(backend, func(t *testing.T) {
			h := startHost(t, backendArgs(startBackend(t, backend), "/restore")...)
			conn := dialPlain(t, h.grpcAddr)
			client := resourcetest.NewClient(pbresource.NewResourceServiceClient(conn))
			write := func(name string, owner *pbresource.ID) *pbresource.Resource {
				data, err := anypb.New(&pbfoov1.Zip{Zap: name})
				require.NoError(t, err)
				out, err := client.Write(t.Context(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: zipID(name), Owner: owner, Data: data}})
				require.NoError(t, err)
				return out.Resource
			}
			owner := write("owner", nil)
			child := write("child", owner.Id)
			grandchild := write("grandchild", child.Id)
			_, err := client.Delete(t.Context(), &pbresource.DeleteRequest{Id: owner.Id})
			require.NoError(t, err)
			client.WaitForDeletion(t, grandchild.Id)

			// The reaper's deletion is recorded as the cascade of its owner's.
			trash, err := pbhistoryv1.NewHistoryServiceClient(conn).ListTrash(t.Context(), &pbhistoryv1.ListTrashRequest{
				Type: foo.ZipType, Tenancy: zipID("").Tenancy, NamePrefix: "grand",
			})
			require.NoError(t, err)
			require.Len(t, trash.Revisions, 1)
			require.True(t, proto.Equal(child.Id, trash.Revisions[0].CascadeFrom), "cascade_from %v", trash.Revisions[0].CascadeFrom)

			rsp, err := pbhistoryv1.NewHistoryServiceClient(conn).Restore(t.Context(), &pbhistoryv1.RestoreRequest{Id: zipID("owner"), WithOwned: true})
			require.NoError(t, err)
			require.Empty(t, rsp.NotRestored)
			require.Len(t, rsp.Owned, 2)
			newChild := client.RequireResourceExists(t, zipID("child"))
			newGrandchild := client.RequireResourceExists(t, zipID("grandchild"))
			require.Equal(t, rsp.Resource.Id.Uid, newChild.Owner.Uid)
			require.Equal(t, newChild.Id.Uid, newGrandchild.Owner.Uid)
			require.NotEqual(t, owner.Id.Uid, rsp.Resource.Id.Uid)
			require.NotEqual(t, child.Id.Uid, newChild.Id.Uid)
		})
	}
}

// historyBackends are the backends the history tests of the host run on.
var historyBackends = []string{"inmem", "etcd"}

// startBackend starts what backend needs: for etcd, an etcd, whose
// endpoints it returns; for inmem, nothing ("").
func startBackend(t *testing.T, backend string) string {
	if backend == "etcd" {
		return etcdtest.Start(t)
	}
	return ""
}

// backendArgs are the host's flags for the backend startBackend started:
// -dev, or etcd at endpoints under prefix.
func backendArgs(endpoints, prefix string) []string {
	if endpoints != "" {
		return []string{"-storage", "etcd", "-etcd-endpoints", endpoints, "-etcd-prefix", prefix, "-drain-period", "0"}
	}
	return []string{"-dev"}
}

func zipID(name string) *pbresource.ID {
	return &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: name}
}

// A roll-back through the host is a compare-and-swap, and a restore from
// the trash is refused while the name is taken, on both backends.
func TestHostRollBackAndTakenName(t *testing.T) {
	for _, backend := range historyBackends {
		t.Run(backend, func(t *testing.T) {
			h := startHost(t, backendArgs(startBackend(t, backend), "/rollback")...)
			conn := dialPlain(t, h.grpcAddr)
			client := resourcetest.NewClient(pbresource.NewResourceServiceClient(conn))
			history := pbhistoryv1.NewHistoryServiceClient(conn)
			var versions []*pbresource.Resource
			for _, zap := range []string{"one", "two", "three"} {
				data, err := anypb.New(&pbfoov1.Zip{Zap: zap})
				require.NoError(t, err)
				out, err := client.Write(t.Context(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: zipID("z"), Data: data}})
				require.NoError(t, err)
				versions = append(versions, out.Resource)
			}
			_, err := history.Restore(t.Context(), &pbhistoryv1.RestoreRequest{Id: zipID("z"), Version: versions[0].Version, ExpectedVersion: versions[1].Version})
			require.Equal(t, codes.Aborted, status.Code(err), "%v", err)

			rsp, err := history.Restore(t.Context(), &pbhistoryv1.RestoreRequest{Id: zipID("z"), Version: versions[0].Version, ExpectedVersion: versions[2].Version})
			require.NoError(t, err)
			require.Equal(t, versions[0].Id.Uid, rsp.Resource.Id.Uid)
			require.True(t, proto.Equal(versions[0].Data, rsp.Resource.Data))

			// Deleted, created again: the deleted lifetime cannot come back
			// under the taken name.
			_, err = client.Delete(t.Context(), &pbresource.DeleteRequest{Id: rsp.Resource.Id})
			require.NoError(t, err)
			_, err = client.Write(t.Context(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: zipID("z"), Data: versions[1].Data}})
			require.NoError(t, err)
			_, err = history.Restore(t.Context(), &pbhistoryv1.RestoreRequest{Id: versions[0].Id})
			require.Equal(t, codes.AlreadyExists, status.Code(err), "%v", err)
		})
	}
}
