package cache_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/internal/testkit/benchutil"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/protobuf/types/known/anypb"
)

var widgetType = &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"}

// w6Resources builds n children spread over owners owners, each with its
// own messages (as a watch stream would deliver them).
func w6Resources(n, owners int) ([]*pbresource.Resource, []*pbresource.ID) {
	ownerIDs := make([]*pbresource.ID, owners)
	for i := range ownerIDs {
		ownerIDs[i] = &pbresource.ID{
			Type:    artistType,
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
			Name:    fmt.Sprintf("owner-%d", i),
			Uid:     resource.NewULID(),
		}
	}
	data, _ := anypb.New(&pbresource.Tenancy{Partition: "payload", Namespace: "payload"})
	out := make([]*pbresource.Resource, n)
	for i := range out {
		out[i] = &pbresource.Resource{
			Id: &pbresource.ID{
				Type:    &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"},
				Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
				Name:    fmt.Sprintf("widget-%d", i),
				Uid:     resource.NewULID(),
			},
			Owner:      resource.CloneID(ownerIDs[i%owners]),
			Version:    fmt.Sprint(i + 1),
			Generation: resource.NewULID(),
			Data:       resource.CloneAny(data),
		}
	}
	return out, ownerIDs
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkW6 is workload W6: 100,000 resources, 1,000 owners with 100
// children each, indexed by owner; lookups of one owner's children.
func BenchmarkW6(b *testing.B) {
	const n, owners = 100_000, 1_000

	// insert times Upserts into an empty cache (wall time, and the
	// process's CPU time, which includes the garbage collector's share and
	// is steadier on a shared machine) and reports two memory
	// figures: B/res-overhead, the heap the cache adds beyond the resources
	// it is given (its entries, ID map and index buckets), and B/res-held,
	// everything held per resource once cached, the resource included.
	insert := func(b *testing.B, build func() []*pbresource.Resource) {
		var total, cpu time.Duration
		var overhead, held float64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			base := heapInUse()
			resources := build()
			before := heapInUse()
			c := cache.New()
			if err := c.AddType(widgetType); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			start, cpuStart := time.Now(), benchutil.CPUTime()
			for _, r := range resources {
				if _, err := c.Upsert(r); err != nil {
					b.Fatal(err)
				}
			}
			total += time.Since(start)
			cpu += benchutil.CPUTime() - cpuStart
			b.StopTimer()
			resources = nil // what the cache does not hold is garbage now
			after := heapInUse()
			overhead += float64(int64(after)-int64(before)) / n
			held += float64(int64(after)-int64(base)) / n
			runtime.KeepAlive(c)
			b.StartTimer()
		}
		b.ReportMetric(float64(total.Nanoseconds())/float64(b.N*n), "ns/insert")
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*n), "cpu-ns/insert")
		b.ReportMetric(overhead/float64(b.N), "B/res-overhead")
		b.ReportMetric(held/float64(b.N), "B/res-held")
	}
	// The resources as a gRPC stream delivers them: every message its own
	// allocation.
	b.Run("insert", func(b *testing.B) {
		insert(b, func() []*pbresource.Resource {
			resources, _ := w6Resources(n, owners)
			return resources
		})
	})
	// The resources as an in-process server or the etcd backend's decoder
	// delivers them: the fixed-size messages of each in one block.
	b.Run("insert-blocks", func(b *testing.B) {
		insert(b, func() []*pbresource.Resource {
			resources, _ := w6Resources(n, owners)
			for i, r := range resources {
				resources[i] = resource.Clone(r)
			}
			return resources
		})
	})

	resources, ownerIDs := w6Resources(n, owners)
	c := cache.New()
	if err := c.AddType(widgetType); err != nil {
		b.Fatal(err)
	}
	for _, r := range resources {
		if _, err := c.Upsert(r); err != nil {
			b.Fatal(err)
		}
	}
	keys := make([]string, owners)
	for i, o := range ownerIDs {
		keys[i] = cache.OwnerKey(o)
	}

	b.Run("list", func(b *testing.B) {
		hits := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			got, err := c.List(widgetType, cache.OwnerIndex, keys[i%owners])
			if err != nil {
				b.Fatal(err)
			}
			hits += len(got)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/lookup")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(hits), "ns/hit")
	})

	// List without the copies: the stored resources, read-only.
	b.Run("list-readonly", func(b *testing.B) {
		hits := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			got, err := c.ListReadOnly(widgetType, cache.OwnerIndex, keys[i%owners])
			if err != nil {
				b.Fatal(err)
			}
			hits += len(got)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/lookup")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(hits), "ns/hit")
	})

	// The stored IDs, read-only.
	b.Run("ids-readonly", func(b *testing.B) {
		hits := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			got, err := c.ListIDsReadOnly(widgetType, cache.OwnerIndex, keys[i%owners])
			if err != nil {
				b.Fatal(err)
			}
			hits += len(got)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/lookup")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(hits), "ns/hit")
	})

	// The lookup an index-based dependency mapper makes: IDs only.
	b.Run("ids", func(b *testing.B) {
		hits := 0
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			got, err := c.ListIDs(widgetType, cache.OwnerIndex, keys[i%owners])
			if err != nil {
				b.Fatal(err)
			}
			hits += len(got)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/lookup")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(hits), "ns/hit")
	})
}
