package pbdecode

import (
	"math/rand/v2"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
)

// randomBatch returns a Batch of up to 20 random events (maybe none).
func randomBatch(rnd *rand.Rand) *pbresource.WatchEvent {
	events := make([]*pbresource.WatchEvent, rnd.IntN(21))
	for i := range events {
		events[i] = randomEvent(rnd)
	}
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Batch_{Batch: &pbresource.WatchEvent_Batch{Events: events}}}
}

// checkWatchMessage decodes b with WatchMessage and proto.Unmarshal and
// fails unless both fail or both give equal messages, and unless the
// result keeps nothing of b. It reports whether the batch fast path
// decoded b.
func checkWatchMessage(t *testing.T, d *Decoder, b []byte) bool {
	t.Helper()
	want := new(pbresource.WatchEvent)
	wantErr := proto.Unmarshal(b, want)
	own := append([]byte(nil), b...)
	got := new(pbresource.WatchEvent)
	err := d.WatchMessage(own, got)
	clear(own)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("WatchMessage error %v, proto.Unmarshal error %v, input %x", err, wantErr, b)
	}
	if err == nil && !proto.Equal(want, got) {
		t.Fatalf("WatchMessage gave %v, proto.Unmarshal %v, input %x", got, want, b)
	}
	_, fast := d.batch(append([]byte(nil), b...))
	return fast
}

// TestWatchMessageMatchesProto checks that batches of random events, and
// single events, decode as with the generic decoder.
func TestWatchMessageMatchesProto(t *testing.T) {
	rnd := rand.New(rand.NewPCG(11, 12))
	var d Decoder
	fast := 0
	for i := range 500 {
		ev := randomBatch(rnd)
		if i%5 == 0 {
			ev = randomEvent(rnd)
		}
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if checkWatchMessage(t, &d, b) {
			fast++
		}
	}
	if fast < 350 {
		t.Fatalf("the batch fast path decoded %d of 400 batches", fast)
	}
}

// TestWatchMessageFallsBack checks encodings the batch fast path leaves to
// the generic decoder, and that they still decode as it does.
func TestWatchMessageFallsBack(t *testing.T) {
	rnd := rand.New(rand.NewPCG(13, 14))
	one := func() []byte {
		b, err := proto.Marshal(randomBatch(rnd))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	nested, err := proto.Marshal(&pbresource.WatchEvent{Event: &pbresource.WatchEvent_Batch_{Batch: &pbresource.WatchEvent_Batch{
		Events: []*pbresource.WatchEvent{randomBatch(rnd)}}}})
	if err != nil {
		t.Fatal(err)
	}
	// An unknown field inside the Batch.
	var unknown []byte
	unknown = protowire.AppendTag(unknown, pblayout.WatchEventBatch, protowire.BytesType)
	unknown = protowire.AppendBytes(unknown, protowire.AppendVarint(protowire.AppendTag(nil, 9, protowire.VarintType), 1))
	// A Batch whose event is cut short.
	var cut []byte
	inner := protowire.AppendBytes(protowire.AppendTag(nil, pblayout.BatchEvents, protowire.BytesType), []byte{0x0a, 0x05, 0x01})
	cut = protowire.AppendBytes(protowire.AppendTag(cut, pblayout.WatchEventBatch, protowire.BytesType), inner)
	long := one()
	for len(long) < 10 {
		long = one()
	}
	var d Decoder
	for name, b := range map[string][]byte{
		"two batches merge": append(one(), one()...),
		"unknown field":     unknown,
		"malformed event":   cut,
		"truncated":         long[:len(long)-1],
	} {
		t.Run(name, func(t *testing.T) {
			if checkWatchMessage(t, &d, b) {
				t.Fatal("the batch fast path took it")
			}
		})
	}
	// A batch in a batch decodes as the generic decoder has it (the inner
	// one by the generic decoder); pbresource.Unbatched refuses it.
	checkWatchMessage(t, &d, nested)
}

// TestCodecDecodesBatches checks that the codec decodes a Batch split
// over several buffers, and that the events keep nothing of them.
func TestCodecDecodesBatches(t *testing.T) {
	rnd := rand.New(rand.NewPCG(15, 16))
	c := NewCodec()
	for range 50 {
		ev := randomBatch(rnd)
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		third := len(b) / 3
		in := mem.BufferSlice{
			mem.SliceBuffer(append([]byte(nil), b[:third]...)),
			mem.SliceBuffer(append([]byte(nil), b[third:2*third]...)),
			mem.SliceBuffer(append([]byte(nil), b[2*third:]...)),
		}
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
}

// FuzzWatchMessage checks that WatchMessage always decodes as the generic
// decoder does, and keeps nothing of its input.
func FuzzWatchMessage(f *testing.F) {
	rnd := rand.New(rand.NewPCG(17, 18))
	for range 10 {
		b, err := proto.Marshal(randomBatch(rnd))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x32, 0x00, 0x32, 0x00})             // two empty batches
	f.Add([]byte{0x32, 0x04, 0x0a, 0x02, 0x1a, 0x00}) // a batch of one EndOfSnapshot
	var d Decoder
	f.Fuzz(func(t *testing.T, b []byte) {
		checkWatchMessage(t, &d, b)
	})
}
