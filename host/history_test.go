package host_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
)

// The host serves the history service beside the ResourceService; with
// -history-versions 0 the storage keeps no history, so it finds nothing.
func TestHostServesHistory(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int // revisions of a resource written twice and deleted
	}{
		{args: []string{"-dev"}, want: 3},
		{args: []string{"-dev", "-history-versions", "1"}, want: 2}, // the last write and the deletion
		{args: []string{"-dev", "-history-versions", "0"}, want: 0},
	} {
		t.Run(tc.args[len(tc.args)-1], func(t *testing.T) {
			h := startHost(t, tc.args...)
			conn := dialPlain(t, h.grpcAddr)
			client := pbresource.NewResourceServiceClient(conn)
			id := &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "z"}
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

			revs, err := pbhistoryv1.NewHistoryServiceClient(conn).ListRevisions(t.Context(), &pbhistoryv1.ListRevisionsRequest{Id: id})
			require.NoError(t, err)
			require.Len(t, revs.Revisions, tc.want, "revisions")
		})
	}
}
