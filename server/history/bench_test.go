package history_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/history"
	"github.com/loomrt/loom/storage/inmem"
)

// BenchmarkHistory measures, in process on the in-memory backend, what
// `loom history` and `loom trash` ask for: the 20 kept versions of a
// resource (one ListRevisions call), and the whole trash of a type holding
// 10,000 deleted resources, page by page (100 calls of the default page
// size). ms/listing is the time per listing.
func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()
	registry := resource.NewRegistry()
	if err := resource.Register(registry, resource.Registration[*pbfoov1.Zip]{Type: widgetType, Scope: resource.ScopeNamespace}); err != nil {
		b.Fatal(err)
	}
	srv := server.New(server.Config{Backend: inmem.New(), Registry: registry})
	svc := history.New(srv)
	tenancy := &pbresource.Tenancy{Partition: "default", Namespace: "default"}
	write := func(name string, i int) *pbresource.Resource {
		data, err := anypb.New(&pbfoov1.Zip{Zap: fmt.Sprintf("version %d", i)})
		if err != nil {
			b.Fatal(err)
		}
		out, err := srv.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
			Id: &pbresource.ID{Type: widgetType, Tenancy: tenancy, Name: name}, Data: data,
		}})
		if err != nil {
			b.Fatal(err)
		}
		return out.Resource
	}

	b.Run("revisions-20", func(b *testing.B) {
		for i := range 20 {
			write("versioned", i)
		}
		req := &pbhistoryv1.ListRevisionsRequest{Id: &pbresource.ID{Type: widgetType, Tenancy: tenancy, Name: "versioned"}}
		b.ReportAllocs()
		for b.Loop() {
			rsp, err := svc.ListRevisions(ctx, req)
			if err != nil || len(rsp.Revisions) != 20 {
				b.Fatalf("%d revisions, %v", len(rsp.GetRevisions()), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/listing")
	})

	b.Run("trash-10k", func(b *testing.B) {
		for i := range 10_000 {
			res := write(fmt.Sprintf("deleted-%05d", i), i)
			if _, err := srv.Delete(ctx, &pbresource.DeleteRequest{Id: res.Id}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportAllocs()
		for b.Loop() {
			n := 0
			req := &pbhistoryv1.ListTrashRequest{Type: widgetType, Tenancy: tenancy}
			for {
				rsp, err := svc.ListTrash(ctx, req)
				if err != nil {
					b.Fatal(err)
				}
				n += len(rsp.Revisions)
				if rsp.NextPageToken == "" {
					break
				}
				req.PageToken = rsp.NextPageToken
			}
			if n != 10_000 {
				b.Fatalf("listed %d deleted resources, want 10000", n)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/listing")
	})
}
