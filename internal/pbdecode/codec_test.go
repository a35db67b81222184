package pbdecode

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
)

// TestCodec checks that the codec decodes WatchEvents and other messages as
// the generic decoder does, and that what it decoded stays intact once gRPC
// reuses the buffers it read from.
func TestCodec(t *testing.T) {
	rnd := rand.New(rand.NewPCG(9, 10))
	c := NewCodec()
	for range 200 {
		ev := randomEvent(rnd)
		data, err := c.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		// Split the encoding over two buffers, as gRPC may deliver it.
		b := data.Materialize()
		half := len(b) / 2
		in := mem.BufferSlice{mem.SliceBuffer(append([]byte(nil), b[:half]...)), mem.SliceBuffer(append([]byte(nil), b[half:]...))}
		got := new(pbresource.WatchEvent)
		if err := c.Unmarshal(in, got); err != nil {
			t.Fatal(err)
		}
		for _, buf := range in {
			clear(buf.ReadOnlyData())
		}
		if !proto.Equal(got, ev) {
			t.Fatalf("decoded %v, want %v", got, ev)
		}
	}
	req := &pbresource.WatchListRequest{Type: &pbresource.Type{Kind: "K"}, NamePrefix: "p"}
	data, err := c.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	got := new(pbresource.WatchListRequest)
	if err := c.Unmarshal(data, got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, req) {
		t.Fatalf("decoded %v, want %v", got, req)
	}
	if c.Name() != "proto" {
		t.Fatalf("codec name %q, want gRPC's proto codec's", c.Name())
	}
}
