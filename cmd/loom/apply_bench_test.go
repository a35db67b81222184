package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/resourcetest"
)

// BenchmarkW14Apply is the apply part of workload W14: `loom apply` of
// 1,000 new resources to an in-memory server over gRPC (an in-memory
// connection), through the bulk import and one Write at a time (as against
// a server without the bulk service), in the same run. Each iteration
// applies to a fresh server.
func BenchmarkW14Apply(b *testing.B) {
	const n = 1000
	var file strings.Builder
	for i := range n {
		fmt.Fprintf(&file, "id: {type: foo.v1.Zip, name: z%04d, tenancy: {partition: default}}\n"+
			"data: {'@type': type.googleapis.com/loom.example.foo.v1.Zip, zap: z}\n---\n", i)
	}
	types := &typeResolver{ctx: context.Background(), noServer: errors.New("no reflection in this benchmark")}
	for _, path := range []string{"bulk", "one-at-a-time"} {
		b.Run(path, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				svc := resourcetest.StartService(b, resourcetest.WithTypes(foo.RegisterTypes), resourcetest.OverGRPC())
				s := &session{client: svc.Client, types: types, stderr: io.Discard}
				if path == "bulk" {
					s.bulk = svc.Bulk
				}
				docs, err := parseDocuments("bench.yaml", []byte(file.String()), types)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := applyDocuments(context.Background(), s, docs, false, "", io.Discard); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "resources/s")
		})
	}
}
