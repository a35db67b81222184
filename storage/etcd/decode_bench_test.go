package etcd

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

func BenchmarkDecode(b *testing.B) {
	res := benchResource("widget-000001")
	value, _, err := encode(res, res.Id.Uid)
	must(b, err)
	kv := &mvccpb.KeyValue{Key: []byte("/x/r/bench/Widget/default/default/widget-000001"), Value: value, ModRevision: 12345}
	b.ReportAllocs()
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		if _, err := decode(kv); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeAll decodes the 10,000 values of W9's list-10k as List
// does, once they have arrived (ns/op is per range).
func BenchmarkDecodeAll(b *testing.B) {
	const n = 10000
	kvs := make([]*mvccpb.KeyValue, n)
	for i := range kvs {
		res := benchResource(benchName(i))
		value, _, err := encode(res, res.Id.Uid)
		must(b, err)
		kvs[i] = &mvccpb.KeyValue{Key: []byte("/x/r/bench/Widget/default/default/" + res.Id.Name), Value: value, ModRevision: int64(1000 + i)}
	}
	b.ReportAllocs()
	for b.Loop() {
		out, err := decodeAll(kvs)
		must(b, err)
		if len(out) != n {
			b.Fatalf("decoded %d", len(out))
		}
	}
}
