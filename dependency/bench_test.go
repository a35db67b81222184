package dependency_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/dependency"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"google.golang.org/protobuf/types/known/anypb"
)

// BenchmarkMapByIndex maps a Zip to the 100 Bars (of 10,000) that name it,
// through a reference index: the lookup an index-based mapper makes.
func BenchmarkMapByIndex(b *testing.B) {
	const zips, perZip = 100, 100
	c := cache.New()
	if err := c.AddType(foo.BarV1Type, dependency.ReferenceIndex("by-zip", func(bar *pbfoov1.Bar) resource.ReferenceOrID { return bar.Qux })); err != nil {
		b.Fatal(err)
	}
	zipRes := make([]*pbresource.Resource, zips)
	for z := range zipRes {
		zipRes[z] = &pbresource.Resource{Id: &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: fmt.Sprintf("zip-%d", z), Uid: resource.NewULID()}}
		for i := 0; i < perZip; i++ {
			data, err := anypb.New(&pbfoov1.Bar{Baz: "x", Qux: zipRes[z].Id})
			if err != nil {
				b.Fatal(err)
			}
			id := &pbresource.ID{Type: foo.BarV1Type, Tenancy: tenancy, Name: fmt.Sprintf("bar-%d-%d", z, i), Uid: resource.NewULID()}
			if _, err := c.Upsert(&pbresource.Resource{Id: id, Version: "1", Data: data}); err != nil {
				b.Fatal(err)
			}
		}
	}
	mapper := dependency.MapByIndex(foo.BarV1Type, "by-zip")
	rt := reconcile.Runtime{Cache: c}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reqs, err := mapper(ctx, rt, zipRes[i%zips])
		if err != nil || len(reqs) != perZip {
			b.Fatalf("%d requests, %v", len(reqs), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perZip), "ns/request")
}
