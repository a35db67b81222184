package resource_test

import (
	"testing"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// BenchmarkDecode decodes W1's payload, a StringValue, as the cache does on
// a resource's first typed read.
func BenchmarkDecode(b *testing.B) {
	data, err := anypb.New(wrapperspb.String("payload-widget-1"))
	if err != nil {
		b.Fatal(err)
	}
	res := &pbresource.Resource{Data: data}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := resource.Decode[*wrapperspb.StringValue](res); err != nil {
			b.Fatal(err)
		}
	}
}
