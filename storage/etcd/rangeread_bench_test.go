package etcd

import (
	"context"
	"testing"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// BenchmarkListLarge is W9's list-10k with 50,000 resources, written 100
// to a transaction: a range read in pages (see readRange) next to one raw
// range read.
func BenchmarkListLarge(b *testing.B) {
	const n, perTxn = 50000, 100
	ctx := context.Background()
	be := New(testClient, WithPrefix(newPrefix()))
	for i := 0; i < n; i += perTxn {
		var ops []clientv3.Op
		for j := i; j < i+perTxn; j++ {
			res := benchResource(benchName(j))
			value, _, err := encode(res, res.Id.Uid)
			must(b, err)
			ops = append(ops, clientv3.OpPut(be.keys.resource(res.Id), string(value)))
		}
		_, err := testClient.Txn(ctx).Then(ops...).Commit()
		must(b, err)
	}
	ten := &pbresource.Tenancy{Partition: "default", Namespace: "default"}
	typ := storage.UnversionedTypeFrom(benchType)
	q, err := be.keys.query(typ, ten, "")
	must(b, err)
	b.ReportAllocs()
	pair(b, 1, func(int) {
		list, err := be.List(ctx, storage.EventualConsistency, typ, ten, "")
		must(b, err)
		if len(list) != n {
			b.Fatalf("listed %d", len(list))
		}
	}, func(int) {
		resp, err := testClient.Get(ctx, q.rangePrefix, clientv3.WithPrefix(), clientv3.WithSerializable())
		must(b, err)
		if len(resp.Kvs) != n {
			b.Fatalf("raw range found %d", len(resp.Kvs))
		}
	})
}
