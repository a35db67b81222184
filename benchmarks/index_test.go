package benchmarks

// Workload W6 on Loom's cache and on client-go's Indexer: 100,000
// resources, 1,000 owners with 100 children each, indexed by owner.

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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8scache "k8s.io/client-go/tools/cache"
)

const w6N, w6Owners = 100_000, 1_000

var (
	widgetType = &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"}
	ownerType  = &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Owner"}
)

// loomW6 builds the children as a watch stream delivers them: each with its
// own messages.
func loomW6() ([]*pbresource.Resource, []string) {
	owners := make([]*pbresource.ID, w6Owners)
	keys := make([]string, w6Owners)
	for i := range owners {
		owners[i] = &pbresource.ID{
			Type:    ownerType,
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
			Name:    fmt.Sprintf("owner-%d", i),
			Uid:     resource.NewULID(),
		}
		keys[i] = cache.OwnerKey(owners[i])
	}
	data, _ := anypb.New(&pbresource.Tenancy{Partition: "payload", Namespace: "payload"})
	out := make([]*pbresource.Resource, w6N)
	for i := range out {
		out[i] = &pbresource.Resource{
			Id: &pbresource.ID{
				Type:    &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"},
				Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
				Name:    fmt.Sprintf("widget-%d", i),
				Uid:     resource.NewULID(),
			},
			Owner:      resource.CloneID(owners[i%w6Owners]),
			Version:    fmt.Sprint(i + 1),
			Generation: resource.NewULID(),
			Data:       resource.CloneAny(data),
		}
	}
	return out, keys
}

// clientGoW6 builds the same children as ConfigMaps with one owner
// reference each and a one-entry payload.
func clientGoW6() ([]*corev1.ConfigMap, []string) {
	type owner struct {
		name string
		uid  types.UID
	}
	owners := make([]owner, w6Owners)
	keys := make([]string, w6Owners)
	for i := range owners {
		owners[i] = owner{fmt.Sprintf("owner-%d", i), types.UID(resource.NewULID())}
		keys[i] = string(owners[i].uid)
	}
	controller := true
	out := make([]*corev1.ConfigMap, w6N)
	for i := range out {
		o := owners[i%w6Owners]
		out[i] = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name:            fmt.Sprintf("widget-%d", i),
				Namespace:       "default",
				UID:             types.UID(resource.NewULID()),
				ResourceVersion: fmt.Sprint(i + 1),
				Generation:      1,
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "bench/v1", Kind: "Owner", Name: o.name, UID: o.uid, Controller: &controller,
				}},
			},
			Data: map[string]string{"payload": "payload"},
		}
	}
	return out, keys
}

const ownerIndex = "owner"

func newIndexer() k8scache.Indexer {
	return k8scache.NewIndexer(k8scache.MetaNamespaceKeyFunc, k8scache.Indexers{
		ownerIndex: func(obj any) ([]string, error) {
			m, err := meta.Accessor(obj)
			if err != nil {
				return nil, err
			}
			refs := m.GetOwnerReferences()
			out := make([]string, len(refs))
			for i, r := range refs {
				out[i] = string(r.UID)
			}
			return out, nil
		},
	})
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkW6 is workload W6. Sub-benchmarks:
//
//   - insert: ns (wall and CPU) per inserted resource, and the heap the
//     store adds beyond the objects themselves (B/res-overhead: both keep
//     the objects they are given as they are, and add their maps and index
//     entries).
//   - list: one owner's children per lookup. Loom returns copies the caller
//     owns; client-go's ByIndex returns the shared objects (a controller
//     must not change them), so impl=client-go-deepcopy adds the DeepCopy
//     that makes the two equivalent.
//     impl=loom-readonly is Loom's ListReadOnly: the stored resources,
//     not copied, under the same rule as ByIndex's (read, never change).
//   - ids: the lookup an index-based dependency mapper makes: Loom's
//     ListIDs (copies), client-go's IndexKeys (store keys, no objects);
//     impl=loom-readonly is ListIDsReadOnly (the stored IDs, not copied).
func BenchmarkW6(b *testing.B) {
	b.Run("insert", func(b *testing.B) {
		b.Run("impl=loom", func(b *testing.B) {
			var total, cpu time.Duration
			var overhead float64
			for range b.N {
				b.StopTimer()
				resources, _ := loomW6()
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
				overhead += float64(int64(heapInUse())-int64(before)) / w6N
				runtime.KeepAlive(c)
				b.StartTimer()
			}
			ns := float64(total.Nanoseconds()) / float64(b.N*w6N)
			cpuNs := float64(cpu.Nanoseconds()) / float64(b.N*w6N)
			b.ReportMetric(ns, "ns/insert")
			b.ReportMetric(cpuNs, "cpu-ns/insert")
			b.ReportMetric(overhead/float64(b.N), "B/res-overhead")
			recordLoom(b, "W6/insert", "cpu-ns/insert", cpuNs)
		})
		b.Run("impl=client-go", func(b *testing.B) {
			var total, cpu time.Duration
			var overhead float64
			for range b.N {
				b.StopTimer()
				objs, _ := clientGoW6()
				before := heapInUse()
				ix := newIndexer()
				b.StartTimer()
				start, cpuStart := time.Now(), benchutil.CPUTime()
				for _, o := range objs {
					if err := ix.Add(o); err != nil {
						b.Fatal(err)
					}
				}
				total += time.Since(start)
				cpu += benchutil.CPUTime() - cpuStart
				b.StopTimer()
				overhead += float64(int64(heapInUse())-int64(before)) / w6N
				runtime.KeepAlive(ix)
				runtime.KeepAlive(objs)
				b.StartTimer()
			}
			ns := float64(total.Nanoseconds()) / float64(b.N*w6N)
			cpuNs := float64(cpu.Nanoseconds()) / float64(b.N*w6N)
			b.ReportMetric(ns, "ns/insert")
			b.ReportMetric(cpuNs, "cpu-ns/insert")
			b.ReportMetric(overhead/float64(b.N), "B/res-overhead")
			reportRatio(b, "W6/insert", "cpu-ns/insert", cpuNs)
		})
	})

	resources, loomKeys := loomW6()
	c := cache.New()
	if err := c.AddType(widgetType); err != nil {
		b.Fatal(err)
	}
	for _, r := range resources {
		if _, err := c.Upsert(r); err != nil {
			b.Fatal(err)
		}
	}
	objs, cgKeys := clientGoW6()
	ix := newIndexer()
	for _, o := range objs {
		if err := ix.Add(o); err != nil {
			b.Fatal(err)
		}
	}

	// lookups runs get over the owners in turn and reports per lookup and
	// per hit, in wall time and in process CPU time (which includes the
	// garbage collector's share, and is the steadier figure on a shared
	// machine; the ratio uses it).
	lookups := func(b *testing.B, workload string, loom bool, get func(i int) int) {
		hits := 0
		runtime.GC()
		b.ResetTimer()
		cpuStart := benchutil.CPUTime()
		for i := range b.N {
			hits += get(i % w6Owners)
		}
		cpu := benchutil.CPUTime() - cpuStart
		b.StopTimer()
		if hits != b.N*w6N/w6Owners {
			b.Fatalf("%d hits in %d lookups, want %d each", hits, b.N, w6N/w6Owners)
		}
		perHit := float64(b.Elapsed().Nanoseconds()) / float64(hits)
		cpuPerHit := float64(cpu.Nanoseconds()) / float64(hits)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/lookup")
		b.ReportMetric(perHit, "ns/hit")
		b.ReportMetric(cpuPerHit, "cpu-ns/hit")
		if loom {
			recordLoom(b, workload, "cpu-ns/hit", cpuPerHit)
		} else {
			reportRatio(b, workload, "cpu-ns/hit", cpuPerHit)
		}
	}

	b.Run("list", func(b *testing.B) {
		b.Run("impl=loom", func(b *testing.B) {
			lookups(b, "W6/list", true, func(i int) int {
				got, err := c.List(widgetType, cache.OwnerIndex, loomKeys[i])
				if err != nil {
					b.Fatal(err)
				}
				return len(got)
			})
		})
		b.Run("impl=loom-readonly", func(b *testing.B) {
			lookups(b, "W6/list-readonly", true, func(i int) int {
				got, err := c.ListReadOnly(widgetType, cache.OwnerIndex, loomKeys[i])
				if err != nil {
					b.Fatal(err)
				}
				return len(got)
			})
		})
		b.Run("impl=client-go", func(b *testing.B) {
			lookups(b, "W6/list", false, func(i int) int {
				got, err := ix.ByIndex(ownerIndex, cgKeys[i])
				if err != nil {
					b.Fatal(err)
				}
				return len(got)
			})
		})
		b.Run("impl=client-go-deepcopy", func(b *testing.B) {
			lookups(b, "W6/list", false, func(i int) int {
				got, err := ix.ByIndex(ownerIndex, cgKeys[i])
				if err != nil {
					b.Fatal(err)
				}
				out := make([]*corev1.ConfigMap, len(got))
				for j, o := range got {
					out[j] = o.(*corev1.ConfigMap).DeepCopy()
				}
				return len(out)
			})
		})
	})

	b.Run("ids", func(b *testing.B) {
		b.Run("impl=loom", func(b *testing.B) {
			lookups(b, "W6/ids", true, func(i int) int {
				got, err := c.ListIDs(widgetType, cache.OwnerIndex, loomKeys[i])
				if err != nil {
					b.Fatal(err)
				}
				return len(got)
			})
		})
		b.Run("impl=loom-readonly", func(b *testing.B) {
			lookups(b, "W6/ids-readonly", true, func(i int) int {
				got, err := c.ListIDsReadOnly(widgetType, cache.OwnerIndex, loomKeys[i])
				if err != nil {
					b.Fatal(err)
				}
				return len(got)
			})
		})
		b.Run("impl=client-go", func(b *testing.B) {
			lookups(b, "W6/ids", false, func(i int) int {
				got, err := ix.IndexKeys(ownerIndex, cgKeys[i])
				if err != nil {
					b.Fatal(err)
				}
				return len(got)
			})
		})
	})
}
