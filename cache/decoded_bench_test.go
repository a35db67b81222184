package cache_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/loomrt/loom/cache"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/protobuf/types/known/anypb"
)

// decodedBench fills a cache with n Bars (a string and a reference, as in
// examples/foo), owned ten to an owner.
func decodedBench(b *testing.B, n int) (*cache.Cache, []*pbresource.ID, []string, []string) {
	b.Helper()
	c := cache.New()
	if err := c.AddType(widgetType); err != nil {
		b.Fatal(err)
	}
	ids := make([]*pbresource.ID, n)
	keys := make([]string, n)
	var owners []string
	ten := &pbresource.Tenancy{Partition: "default", Namespace: "default"}
	var owner *pbresource.ID
	for i := range ids {
		if i%10 == 0 {
			owner = &pbresource.ID{Type: artistType, Tenancy: ten, Name: fmt.Sprintf("owner-%d", i), Uid: resource.NewULID()}
			owners = append(owners, cache.OwnerKey(owner))
		}
		data, err := anypb.New(&pbfoov1.Bar{
			Baz: fmt.Sprintf("bar number %d", i),
			Qux: &pbresource.ID{Type: &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Zip"}, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: fmt.Sprintf("zip-%d", i)},
		})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = &pbresource.ID{Type: widgetType, Tenancy: ten, Name: fmt.Sprintf("bar-%d", i), Uid: resource.NewULID()}
		keys[i] = cache.Key(ids[i])
		if _, err := c.Upsert(&pbresource.Resource{Id: ids[i], Owner: owner, Version: "1", Generation: resource.NewULID(), Data: data}); err != nil {
			b.Fatal(err)
		}
	}
	return c, ids, keys, owners
}

// BenchmarkDecodedRead compares decoding on every read with the typed reads,
// which decode once per cache entry: one resource by ID, as a reconciler
// reads its own, and ten under an index key, as a mapper or a reconciler
// reads related ones.
func BenchmarkDecodedRead(b *testing.B) {
	const n = 10_000
	c, ids, keys, owners := decodedBench(b, n)
	for _, id := range ids { // warm: every entry decoded once
		if _, err := cache.GetDecodedByIDReadOnly[*pbfoov1.Bar](c, id); err != nil {
			b.Fatal(err)
		}
	}
	run := func(name string, read func(i int) error) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := read(i % n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// One resource, the caller's own copy.
	run("get/decode-per-read", func(i int) error {
		res, err := c.GetByID(ids[i])
		if err != nil {
			return err
		}
		_, err = resource.DecodeResource[*pbfoov1.Bar](res)
		return err
	})
	run("get/decoded-once", func(i int) error {
		_, err := cache.GetDecodedByID[*pbfoov1.Bar](c, ids[i])
		return err
	})
	// One resource, read-only.
	run("get-readonly/decode-per-read", func(i int) error {
		rs, err := c.ListReadOnly(widgetType, cache.IDIndex, keys[i])
		if err != nil {
			return err
		}
		_, err = resource.DecodeResource[*pbfoov1.Bar](rs[0])
		return err
	})
	run("get-readonly/decoded-once", func(i int) error {
		_, err := cache.GetDecodedByIDReadOnly[*pbfoov1.Bar](c, ids[i])
		return err
	})
	// Ten resources under one owner, read-only.
	run("list10-readonly/decode-per-read", func(i int) error {
		return decodeEach(c.ListReadOnly(widgetType, cache.OwnerIndex, owners[i%len(owners)]))
	})
	run("list10-readonly/decoded-once", func(i int) error {
		_, err := cache.ListDecodedReadOnly[*pbfoov1.Bar](c, widgetType, cache.OwnerIndex, owners[i%len(owners)])
		return err
	})
	run("list10/decode-per-read", func(i int) error {
		return decodeEach(c.List(widgetType, cache.OwnerIndex, owners[i%len(owners)]))
	})
	run("list10/decoded-once", func(i int) error {
		_, err := cache.ListDecoded[*pbfoov1.Bar](c, widgetType, cache.OwnerIndex, owners[i%len(owners)])
		return err
	})
}

// BenchmarkDecodedMemory reports what keeping the decoded form costs: the
// heap the cache grows by per entry once every entry has been read typed.
func BenchmarkDecodedMemory(b *testing.B) {
	const n = 10_000
	var perEntry float64
	for i := 0; i < b.N; i++ {
		c, ids, _, _ := decodedBench(b, n)
		before := heapInUse()
		for _, id := range ids {
			if _, err := cache.GetDecodedByIDReadOnly[*pbfoov1.Bar](c, id); err != nil {
				b.Fatal(err)
			}
		}
		perEntry += float64(int64(heapInUse())-int64(before)) / n
		runtime.KeepAlive(c)
		runtime.KeepAlive(ids)
	}
	b.ReportMetric(perEntry/float64(b.N), "B/entry-decoded")
}

// decodeEach decodes the Data of every listed resource, as a reader without
// typed reads would.
func decodeEach(rs []*pbresource.Resource, err error) error {
	if err != nil {
		return err
	}
	for _, r := range rs {
		if _, err := resource.DecodeResource[*pbfoov1.Bar](r); err != nil {
			return err
		}
	}
	return nil
}
