package host_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/server/bulk"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// BenchmarkW14Bulk is workload W14 of docs/performance.md: a bulk import
// of n small resources (foo.v1.Zip, ~100 bytes each) into an empty host
// over loopback TCP gRPC, on the in-memory backend (-dev) and on etcd
// (one local member), and an export of them. Each iteration starts a fresh
// host. n is 100,000 unless $LOOM_W14_N says otherwise.
func BenchmarkW14Bulk(b *testing.B) {
	n := 100_000
	if s := os.Getenv("LOOM_W14_N"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			b.Fatal(err)
		}
		n = v
	}
	resources := make([]*pbresource.Resource, n)
	for i := range resources {
		data, err := anypb.New(&pbfoov1.Zip{Zap: fmt.Sprintf("zap %d", i)})
		if err != nil {
			b.Fatal(err)
		}
		resources[i] = &pbresource.Resource{Id: zipID(fmt.Sprintf("zip-%06d", i)), Data: data}
	}
	for _, backend := range []string{"inmem", "etcd"} {
		b.Run(backend, func(b *testing.B) {
			var importSecs, exportSecs float64
			endpoints := ""
			if backend == "etcd" {
				endpoints = etcdtest.Start(b) // one etcd, a prefix per iteration
			}
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				h := startHost(b, backendArgs(endpoints, fmt.Sprintf("/w14-%d", i))...)
				conn, err := grpc.NewClient(h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
				if err != nil {
					b.Fatal(err)
				}
				client := pbbulkv1.NewBulkServiceClient(conn)
				b.StartTimer()

				span := b.Elapsed()
				rsp, err := bulk.SendImport(b.Context(), client, nil, resources)
				if err != nil || rsp.Created != uint64(n) {
					b.Fatalf("import: %v, %v", err, rsp.GetRejections())
				}
				importSecs += (b.Elapsed() - span).Seconds()
				span = b.Elapsed()
				out, _, err := bulk.ReceiveExport(b.Context(), client, &pbbulkv1.ExportRequest{Types: []*pbresource.Type{foo.ZipType}})
				if err != nil || len(out) != n {
					b.Fatalf("export: %d resources, %v", len(out), err)
				}
				exportSecs += (b.Elapsed() - span).Seconds()

				b.StopTimer()
				conn.Close()
				if err := h.stop(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(n)*float64(b.N)/importSecs, "imported/s")
			b.ReportMetric(exportSecs/float64(b.N), "s/export")
			b.ReportMetric(0, "ns/op")
		})
	}
}
