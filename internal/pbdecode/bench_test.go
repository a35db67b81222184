package pbdecode

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/loomrt/loom/proto/pbresource"
)

// benchEvent is a W2 widget with its status, as a remote cache receives it.
func benchEvent(b *testing.B) []byte {
	data, err := anypb.New(wrapperspb.String("payload-widget-000001"))
	if err != nil {
		b.Fatal(err)
	}
	res := &pbresource.Resource{
		Id: &pbresource.ID{
			Uid: "01JD5Z8V7R3N2Q4K6M8P0S2T4V", Name: "widget-000001",
			Type:    &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"},
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		},
		Version: "123456", Generation: "01JD5Z8V7R3N2Q4K6M8P0S2T4W",
		Status: map[string]*pbresource.Status{"bench.widget": {
			ObservedGeneration: "01JD5Z8V7R3N2Q4K6M8P0S2T4W",
			Conditions:         []*pbresource.Condition{{Type: "Accepted", State: pbresource.Condition_STATE_TRUE}},
			UpdatedAt:          timestamppb.Now(),
		}},
		Data: data,
	}
	enc, err := proto.Marshal(&pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: res}}})
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

func BenchmarkWatchEvent(b *testing.B) {
	enc := benchEvent(b)
	b.Run("generic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(enc, new(pbresource.WatchEvent)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		var d Decoder
		b.ReportAllocs()
		for b.Loop() {
			if err := d.WatchEvent(enc, new(pbresource.WatchEvent)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchStored is a W9 widget as the etcd backend stores it.
func benchStored(b *testing.B, name string) []byte {
	data, err := anypb.New(wrapperspb.String("a small payload for the widget " + name))
	if err != nil {
		b.Fatal(err)
	}
	enc, err := proto.MarshalOptions{Deterministic: true}.Marshal(&pbresource.Resource{
		Id: &pbresource.ID{
			Uid: "01JD5Z8V7R3N2Q4K6M8P0S2T4V", Name: name,
			Type:    &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"},
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		},
		Generation: "01JD5Z8V7R3N2Q4K6M8P0S2T4W",
		Metadata:   map[string]string{"owner-team": "bench"},
		Data:       data,
	})
	if err != nil {
		b.Fatal(err)
	}
	return enc
}

func BenchmarkResource(b *testing.B) {
	enc := benchStored(b, "widget-000001")
	b.Run("generic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := proto.Unmarshal(enc, new(pbresource.Resource)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Resource(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A range of 1,000 resources, each decoder decoding one range.
	encs := make([][]byte, 1000)
	for i := range encs {
		encs[i] = benchStored(b, fmt.Sprintf("widget-%06d", i))
	}
	b.Run("range", func(b *testing.B) {
		b.ReportAllocs()
		d := new(RangeDecoder)
		i := 0
		for b.Loop() {
			if _, err := d.Resource(encs[i]); err != nil {
				b.Fatal(err)
			}
			if i++; i == len(encs) {
				i, d = 0, new(RangeDecoder)
			}
		}
	})
}
