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
