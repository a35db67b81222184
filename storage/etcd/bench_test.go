package etcd

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// W9 (shared/BENCHMARKS.md): the backend's operations next to the raw etcd
// client doing the equivalent etcd requests, in the same run, against the
// same embedded etcd (the test one: no fsync, so the figures show the cost
// of the client side and etcd's own processing rather than the disk).
//
// Each sub-benchmark alternates blocks of Loom operations (timed by the
// benchmark timer: ns/op is Loom's) and raw ones (timed separately:
// raw-ns/op), so both see the same machine load. ratio is raw time over
// Loom time, i.e. Loom's throughput as a fraction of raw etcd's; the budget
// is >= 0.85.
//
// The raw side sends what a minimal store would: the resource's bytes
// encoded once up front, the same compare-and-swap transactions, ranges and
// watches, and no decoding. The difference is what Loom adds: encoding and
// decoding resources, the identity compare, copying results,
// filtering and the monotonic-read bookkeeping.

var benchType = &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"}

func benchResource(name string) *pbresource.Resource {
	data, err := anypb.New(wrapperspb.String("a small payload for the widget " + name))
	if err != nil {
		panic(err)
	}
	return &pbresource.Resource{
		Id: &pbresource.ID{
			Uid:     ulid.Make().String(),
			Name:    name,
			Type:    benchType,
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		},
		Generation: ulid.Make().String(),
		Metadata:   map[string]string{"owner-team": "bench"},
		Data:       data,
	}
}

func benchName(i int) string { return fmt.Sprintf("widget-%06d", i) }

// pair runs loom and raw in alternating blocks of block operations until
// each has done b.N, and reports their times and ratio. Both get the
// operation's index. Blocks amortise the cost of stopping the benchmark
// timer (it reads the memory statistics) over fast operations; slow ones
// alternate one by one.
func pair(b *testing.B, block int, loom, raw func(i int)) {
	var rawTime time.Duration
	b.ResetTimer()
	for start := 0; start < b.N; start += block {
		end := min(start+block, b.N)
		b.StartTimer()
		for i := start; i < end; i++ {
			loom(i)
		}
		b.StopTimer()
		t0 := time.Now()
		for i := start; i < end; i++ {
			raw(i)
		}
		rawTime += time.Since(t0)
	}
	loomNs := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	rawNs := float64(rawTime.Nanoseconds()) / float64(b.N)
	b.ReportMetric(1e9/loomNs, "ops/s")
	b.ReportMetric(rawNs, "raw-ns/op")
	b.ReportMetric(1e9/rawNs, "raw-ops/s")
	b.ReportMetric(rawNs/loomNs, "ratio")
}

func must(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

func BenchmarkW9(b *testing.B) {
	ctx := context.Background()
	kv := testClient

	b.Run("op=write-create", func(b *testing.B) {
		// Fresh prefixes every storeSize creates, so the figure does not
		// depend on b.N.
		const storeSize = 10000
		var be *Backend
		var rawPrefix string
		in := benchResource("")
		value, _, err := encode(in, in.Id.Uid)
		must(b, err)
		pair(b, 64, func(i int) {
			if i%storeSize == 0 {
				be = New(kv, WithPrefix(newPrefix()))
			}
			in.Id.Name = benchName(i % storeSize)
			_, err := be.WriteCAS(ctx, in)
			must(b, err)
		}, func(i int) {
			if i%storeSize == 0 {
				rawPrefix = newPrefix() + "/"
			}
			k := rawPrefix + benchName(i%storeSize)
			resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
				Then(clientv3.OpPut(k, string(value))).Commit()
			must(b, err)
			if !resp.Succeeded {
				b.Fatal("raw create failed")
			}
		})
	})

	b.Run("op=write-update", func(b *testing.B) {
		be := New(kv, WithPrefix(newPrefix()))
		stored, err := be.WriteCAS(ctx, benchResource("w"))
		must(b, err)
		in := proto.Clone(stored).(*pbresource.Resource)
		value, _, err := encode(in, in.Id.Uid)
		must(b, err)
		rawKey := newPrefix() + "/w"
		put, err := kv.Put(ctx, rawKey, string(value))
		must(b, err)
		rawRev := put.Header.Revision
		pair(b, 64, func(int) {
			out, err := be.WriteCAS(ctx, in)
			must(b, err)
			in.Version = out.Version
		}, func(int) {
			resp, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(rawKey), "=", rawRev)).
				Then(clientv3.OpPut(rawKey, string(value))).Commit()
			must(b, err)
			if !resp.Succeeded {
				b.Fatal("raw update failed")
			}
			rawRev = resp.Header.Revision
		})
	})

	for _, c := range []struct {
		name        string
		consistency storage.ReadConsistency
	}{{"read", storage.EventualConsistency}, {"read-strong", storage.StrongConsistency}} {
		b.Run("op="+c.name, func(b *testing.B) {
			be := New(kv, WithPrefix(newPrefix()))
			stored, err := be.WriteCAS(ctx, benchResource("r"))
			must(b, err)
			rk := be.keys.resource(stored.Id)
			var rawOpts []clientv3.OpOption
			if c.consistency == storage.EventualConsistency {
				rawOpts = append(rawOpts, clientv3.WithSerializable())
			}
			pair(b, 64, func(int) {
				_, err := be.Read(ctx, c.consistency, stored.Id)
				must(b, err)
			}, func(int) {
				resp, err := kv.Get(ctx, rk, rawOpts...)
				must(b, err)
				if len(resp.Kvs) != 1 {
					b.Fatal("raw read found nothing")
				}
			})
		})
	}

	b.Run("op=list-10k", func(b *testing.B) {
		const n = 10000
		be := New(kv, WithPrefix(newPrefix()))
		for i := range n {
			_, err := be.WriteCAS(ctx, benchResource(benchName(i)))
			must(b, err)
		}
		ten := &pbresource.Tenancy{Partition: "default", Namespace: "default"}
		typ := storage.UnversionedTypeFrom(benchType)
		q, err := be.keys.query(typ, ten, "")
		must(b, err)
		pair(b, 1, func(int) {
			list, err := be.List(ctx, storage.EventualConsistency, typ, ten, "")
			must(b, err)
			if len(list) != n {
				b.Fatalf("listed %d", len(list))
			}
		}, func(int) {
			resp, err := kv.Get(ctx, q.rangePrefix, clientv3.WithPrefix(), clientv3.WithSerializable())
			must(b, err)
			if len(resp.Kvs) != n {
				b.Fatalf("raw range found %d", len(resp.Kvs))
			}
		})
		b.ReportMetric(float64(n), "res/op")
	})

	// The watch delivers 10,000 changes etcd already holds in its history:
	// both sides replay them from the same revision, Loom through a watch
	// resumed from it (WatchListSince), which the change feed's ring does
	// not cover, so it catches up from etcd's history (decode, filter,
	// buffer, Next), raw etcd by ranging over the watch channel. The
	// changes are written 100 to a transaction: etcd replays history to a
	// watch at most 1,000 revisions per 100 ms, which would otherwise be
	// all either side measures.
	b.Run("op=watch-10k", func(b *testing.B) {
		const n, perTxn = 10000, 100
		be := New(kv, WithPrefix(newPrefix()))
		var from int64
		for i := 0; i < n; i += perTxn {
			var ops []clientv3.Op
			for j := i; j < i+perTxn; j++ {
				res := benchResource(benchName(j))
				value, _, err := encode(res, res.Id.Uid)
				must(b, err)
				ops = append(ops, clientv3.OpPut(be.keys.resource(res.Id), string(value)))
			}
			resp, err := kv.Txn(ctx).Then(ops...).Commit()
			must(b, err)
			if from == 0 {
				from = resp.Header.Revision
			}
		}
		typ := storage.UnversionedTypeFrom(benchType)
		q, err := be.keys.query(typ, &pbresource.Tenancy{Partition: storage.Wildcard, Namespace: storage.Wildcard}, "")
		must(b, err)
		since := strconv.FormatInt(from-1, 10)
		pair(b, 1, func(int) {
			w, err := be.WatchListSince(ctx, typ, anyTenancy, "", storage.WatchOptions{SinceVersion: since})
			must(b, err)
			defer w.Close()
			for range n {
				ev, err := w.Next(ctx)
				must(b, err)
				if ev.GetUpsert() == nil {
					b.Fatal("want an Upsert")
				}
			}
		}, func(int) {
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			got := 0
			for resp := range kv.Watch(wctx, q.rangePrefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV()) {
				must(b, resp.Err())
				got += len(resp.Events)
				if got >= n {
					break
				}
			}
			if got != n {
				b.Fatalf("raw watch got %d events", got)
			}
		})
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
	})
}

// BenchmarkCreateOwned measures WriteCAS creates on etcd without an owner
// and with one: a create with an owner first reads the owner's key and
// compares its create revision in the create's transaction (so the owner
// cannot go between the check and the write).
func BenchmarkCreateOwned(b *testing.B) {
	for _, owned := range []bool{false, true} {
		b.Run(fmt.Sprintf("owned=%v", owned), func(b *testing.B) {
			be := newTestBackend(b)
			ctx := context.Background()
			var owner *pbresource.ID
			if owned {
				out, err := be.WriteCAS(ctx, benchResource("owner"))
				must(b, err)
				owner = out.Id
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				res := benchResource(benchName(i))
				res.Owner = owner
				_, err := be.WriteCAS(ctx, res)
				must(b, err)
			}
		})
	}
}
