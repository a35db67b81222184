package pbdecode

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/proto/pbresource"
)

var marshalOptions = proto.MarshalOptions{Deterministic: true}

// randomResource fills a resource with a random subset of its fields,
// including the status the fast decoder hands to the generic one.
func randomResource(rnd *rand.Rand) *pbresource.Resource {
	str := func() string {
		if rnd.IntN(4) == 0 {
			return ""
		}
		return fmt.Sprintf("s-%d-é", rnd.IntN(1000))
	}
	id := func() *pbresource.ID {
		id := &pbresource.ID{Uid: str(), Name: str()}
		if rnd.IntN(5) > 0 {
			id.Type = &pbresource.Type{Group: str(), GroupVersion: str(), Kind: str()}
		}
		if rnd.IntN(5) > 0 {
			id.Tenancy = &pbresource.Tenancy{Partition: str(), Namespace: str()}
		}
		return id
	}
	res := &pbresource.Resource{Generation: str(), Version: str()}
	if rnd.IntN(8) > 0 {
		res.Id = id()
	}
	if rnd.IntN(2) == 0 {
		res.Owner = id()
	}
	for range rnd.IntN(4) {
		if res.Metadata == nil {
			res.Metadata = map[string]string{}
		}
		res.Metadata[str()] = str()
	}
	for range rnd.IntN(3) {
		if res.Status == nil {
			res.Status = map[string]*pbresource.Status{}
		}
		st := &pbresource.Status{ObservedGeneration: str()}
		for range rnd.IntN(4) {
			c := &pbresource.Condition{
				Type: str(), State: pbresource.Condition_State(rnd.IntN(4) - 1), Reason: str(), Message: str(),
			}
			if rnd.IntN(3) == 0 {
				c.Resource = &pbresource.Reference{Name: str(), Section: str()}
				if rnd.IntN(2) == 0 {
					c.Resource.Type = &pbresource.Type{Group: str(), Kind: str()}
				}
				if rnd.IntN(2) == 0 {
					c.Resource.Tenancy = &pbresource.Tenancy{Namespace: str()}
				}
			}
			st.Conditions = append(st.Conditions, c)
		}
		if rnd.IntN(3) > 0 {
			st.UpdatedAt = timestamppb.New(time.Unix(rnd.Int64N(1<<40)-1<<39, rnd.Int64N(1e9)))
		}
		res.Status[str()] = st
	}
	if rnd.IntN(4) > 0 {
		res.Data = &anypb.Any{TypeUrl: str(), Value: []byte(str())}
	}
	return res
}

// randomEvent wraps a random resource (or none) in a random kind of event.
func randomEvent(rnd *rand.Rand) *pbresource.WatchEvent {
	var res *pbresource.Resource
	if rnd.IntN(10) > 0 {
		res = randomResource(rnd)
	}
	// Versions of Deletes and EndOfSnapshots (Loom's resume points) are
	// there or not, as from a server that reports them or not.
	version := ""
	if rnd.IntN(2) == 0 {
		version = fmt.Sprint(rnd.Uint64())
	}
	switch rnd.IntN(7) {
	case 0:
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Delete_{Delete: &pbresource.WatchEvent_Delete{Resource: res, Version: version}}}
	case 1:
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{Version: version}}}
	case 2:
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Bookmark_{Bookmark: &pbresource.WatchEvent_Bookmark{Version: version}}}
	case 3:
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_NewSnapshot_{NewSnapshot: &pbresource.WatchEvent_NewSnapshot{}}}
	default:
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: res}}}
	}
}

// checkResource decodes b with Resource and proto.Unmarshal and fails
// unless both fail or both give equal messages. It reports whether the
// fast path decoded b.
func checkResource(t *testing.T, b []byte) bool {
	t.Helper()
	want := new(pbresource.Resource)
	wantErr := proto.Unmarshal(b, want)
	got, err := Resource(append([]byte(nil), b...))
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("Resource error %v, proto.Unmarshal error %v, input %x", err, wantErr, b)
	}
	if err == nil && !proto.Equal(want, got) {
		t.Fatalf("Resource gave %v, proto.Unmarshal %v, input %x", got, want, b)
	}
	r := fieldReader{s: string(b), buf: b}
	_, fast := fastResource(&r, nil)
	return fast
}

// checkRange does what checkResource does for d's Resource. It reports
// whether the fast path decoded b.
func checkRange(t *testing.T, d *RangeDecoder, b []byte) bool {
	t.Helper()
	want := new(pbresource.Resource)
	wantErr := proto.Unmarshal(b, want)
	own := append([]byte(nil), b...) // d keeps it
	got, err := d.Resource(own)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("RangeDecoder.Resource error %v, proto.Unmarshal error %v, input %x", err, wantErr, b)
	}
	if err == nil && !proto.Equal(want, got) {
		t.Fatalf("RangeDecoder.Resource gave %v, proto.Unmarshal %v, input %x", got, want, b)
	}
	own = append([]byte(nil), b...)
	r := fieldReader{s: string(own), buf: own}
	_, fast := fastResource(&r, &d.in)
	return fast
}

// checkWatchEvent does what checkResource does for a WatchEvent decoded by
// d, and checks that the event keeps nothing of the bytes it was decoded
// from.
func checkWatchEvent(t *testing.T, d *Decoder, b []byte) bool {
	t.Helper()
	want := new(pbresource.WatchEvent)
	wantErr := proto.Unmarshal(b, want)
	own := append([]byte(nil), b...)
	got := new(pbresource.WatchEvent)
	err := d.WatchEvent(own, got)
	clear(own)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("WatchEvent error %v, proto.Unmarshal error %v, input %x", err, wantErr, b)
	}
	if err == nil && !proto.Equal(want, got) {
		t.Fatalf("WatchEvent gave %v, proto.Unmarshal %v, input %x", got, want, b)
	}
	return d.fastWatchEvent(append([]byte(nil), b...), new(pbresource.WatchEvent))
}

func TestResourceMatchesProto(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	fast := 0
	for range 2000 {
		b, err := marshalOptions.Marshal(randomResource(rnd))
		if err != nil {
			t.Fatal(err)
		}
		if checkResource(t, b) {
			fast++
		}
		for _, c := range damaged(rnd, b) {
			checkResource(t, c)
		}
	}
	if fast < 1500 {
		t.Fatalf("only %d of 2000 resources took the fast path", fast)
	}
}

func TestRangeDecoderMatchesProto(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var d RangeDecoder
	fast := 0
	for range 2000 {
		res := randomResource(rnd)
		if rnd.IntN(2) == 0 {
			// Metadata that other resources have too.
			res.Metadata = map[string]string{"a": "1", fmt.Sprint("k", rnd.IntN(3)): "v"}
		}
		b, err := marshalOptions.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if checkRange(t, &d, b) {
			fast++
		}
		for _, c := range damaged(rnd, b) {
			checkRange(t, &d, c)
		}
	}
	if fast < 1500 {
		t.Fatalf("only %d of 2000 resources took the fast path", fast)
	}
	if len(d.in.meta) == 0 {
		t.Fatal("no metadata map was shared")
	}
}

// TestRangeDecoderShares checks that a RangeDecoder's resources share equal
// Types, Tenancies and metadata, and only those, and that metadata entries
// apart from one another (not a stored encoding) decode right.
func TestRangeDecoderShares(t *testing.T) {
	var d RangeDecoder
	decode := func(name, ns string, meta map[string]string) *pbresource.Resource {
		t.Helper()
		res := &pbresource.Resource{
			Id:       &pbresource.ID{Name: name, Type: &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"}, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: ns}},
			Metadata: meta,
		}
		b, err := marshalOptions.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		got, err := d.Resource(b)
		if err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, res) {
			t.Fatalf("decoded %v, want %v", got, res)
		}
		return got
	}
	a := decode("a", "ns1", map[string]string{"k": "v", "l": "w"})
	b := decode("b", "ns1", map[string]string{"k": "v", "l": "w"})
	c := decode("c", "ns2", map[string]string{"k": "v"})
	if a.Id.Type != b.Id.Type || a.Id.Type != c.Id.Type {
		t.Error("equal Types are not shared")
	}
	if a.Id.Tenancy != b.Id.Tenancy || a.Id.Tenancy == c.Id.Tenancy {
		t.Error("Tenancies are not shared exactly when equal")
	}
	if reflect.ValueOf(a.Metadata).UnsafePointer() != reflect.ValueOf(b.Metadata).UnsafePointer() {
		t.Error("equal metadata is not shared")
	}
	if reflect.ValueOf(a.Metadata).UnsafePointer() == reflect.ValueOf(c.Metadata).UnsafePointer() {
		t.Error("different metadata is shared")
	}

	// The entries of a, then a Generation, then another entry: one map of
	// three entries, a's left as it was.
	enc, err := marshalOptions.Marshal(&pbresource.Resource{Metadata: map[string]string{"k": "v", "l": "w"}})
	if err != nil {
		t.Fatal(err)
	}
	more, err := marshalOptions.Marshal(&pbresource.Resource{Generation: "g", Metadata: map[string]string{"m": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time, a's map is found first
		checkRange(t, &d, append(enc, more...))
	}
	if len(a.Metadata) != 2 {
		t.Errorf("a shared map changed: %v", a.Metadata)
	}
}

func TestWatchEventMatchesProto(t *testing.T) {
	rnd := rand.New(rand.NewPCG(5, 6))
	var d Decoder
	fast := 0
	for range 2000 {
		b, err := marshalOptions.Marshal(randomEvent(rnd))
		if err != nil {
			t.Fatal(err)
		}
		if checkWatchEvent(t, &d, b) {
			fast++
		}
		for _, c := range damaged(rnd, b) {
			checkWatchEvent(t, &d, c)
		}
	}
	if fast < 1500 {
		t.Fatalf("only %d of 2000 events took the fast path", fast)
	}
}

// TestWatchEventFallsBack checks encodings the fast path leaves to the
// generic decoder: unknown fields, a field sent twice (which merges), and
// a field of an unexpected wire type.
func TestWatchEventFallsBack(t *testing.T) {
	res := &pbresource.Resource{
		Id:   &pbresource.ID{Name: "n", Type: &pbresource.Type{Kind: "K"}, Tenancy: &pbresource.Tenancy{Namespace: "ns"}},
		Data: &anypb.Any{TypeUrl: "t", Value: []byte("v")},
	}
	rb, err := marshalOptions.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	wrap := func(inner []byte) []byte {
		up := protowire.AppendTag(nil, 1, protowire.BytesType)
		up = protowire.AppendBytes(up, inner)
		ev := protowire.AppendTag(nil, 1, protowire.BytesType)
		return protowire.AppendBytes(ev, up)
	}
	unknown := protowire.AppendTag(append([]byte(nil), rb...), 99, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 7)
	twice := protowire.AppendTag(append([]byte(nil), rb...), 1, protowire.BytesType)
	twice = protowire.AppendBytes(twice, []byte{0x12, 0x01, 'm'}) // Id again, with Name "m"
	varintVersion := protowire.AppendTag(append([]byte(nil), rb...), 3, protowire.VarintType)
	varintVersion = protowire.AppendVarint(varintVersion, 1)
	var d Decoder
	for name, b := range map[string][]byte{
		"unknown field":     wrap(unknown),
		"Id twice":          wrap(twice),
		"varint Version":    wrap(varintVersion),
		"event twice":       append(wrap(rb), wrap(rb)...),
		"unknown event tag": protowire.AppendVarint(protowire.AppendTag(wrap(rb), 9, protowire.VarintType), 1),
	} {
		t.Run(name, func(t *testing.T) {
			if checkWatchEvent(t, &d, b) {
				t.Fatal("the fast path took an encoding it should leave to the generic decoder")
			}
			got := new(pbresource.WatchEvent)
			if err := d.WatchEvent(append([]byte(nil), b...), got); err != nil {
				t.Fatal(err)
			}
			if name == "unknown field" && len(got.GetUpsert().GetResource().ProtoReflect().GetUnknown()) == 0 {
				t.Fatal("the unknown field was lost")
			}
		})
	}
	if !checkWatchEvent(t, &d, wrap(rb)) {
		t.Fatal("a plain upsert did not take the fast path")
	}
}

// TestWatchEventSharesTypeAndTenancy checks that a Decoder's resources with
// equal Types and Tenancies share those messages, and only those.
func TestWatchEventSharesTypeAndTenancy(t *testing.T) {
	var d Decoder
	decode := func(name, ns string) *pbresource.Resource {
		t.Helper()
		ev := &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: &pbresource.Resource{
			Id:    &pbresource.ID{Name: name, Type: &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"}, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: ns}},
			Owner: &pbresource.ID{Name: "o", Type: &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"}, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: ns}},
		}}}}
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got := new(pbresource.WatchEvent)
		if err := d.WatchEvent(b, got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(got, ev) {
			t.Fatalf("decoded %v, want %v", got, ev)
		}
		return got.GetUpsert().GetResource()
	}
	a, b, c := decode("a", "ns1"), decode("b", "ns1"), decode("c", "ns2")
	if a.Id.Type != b.Id.Type || a.Id.Type != c.Id.Type || a.Owner.Type != a.Id.Type {
		t.Error("equal Types are not shared")
	}
	if a.Id.Tenancy != b.Id.Tenancy || a.Owner.Tenancy != a.Id.Tenancy {
		t.Error("equal Tenancies are not shared")
	}
	if a.Id.Tenancy == c.Id.Tenancy {
		t.Error("different Tenancies are shared")
	}
}

func TestWatchEventSharesMetadata(t *testing.T) {
	var d Decoder
	decode := func(name string, meta map[string]string) *pbresource.Resource {
		t.Helper()
		ev := &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: &pbresource.Resource{
			Id:       &pbresource.ID{Name: name, Type: &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"}},
			Metadata: meta,
		}}}}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got := new(pbresource.WatchEvent)
		if err := d.WatchEvent(b, got); err != nil {
			t.Fatal(err)
		}
		clear(b) // the decoded resource keeps nothing of it
		if !proto.Equal(got, ev) {
			t.Fatalf("decoded %v, want %v", got, ev)
		}
		return got.GetUpsert().GetResource()
	}
	same := func(x, y map[string]string) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	a := decode("a", map[string]string{"team": "x", "tier": "1"})
	b := decode("b", map[string]string{"team": "x", "tier": "1"})
	c := decode("c", map[string]string{"team": "x", "tier": "2"})
	// "ab"+"" and "a"+"b" must not be taken for one another.
	e := decode("e", map[string]string{"ab": ""})
	f := decode("f", map[string]string{"a": "b"})
	big := decode("big", map[string]string{"k": strings.Repeat("v", maxSharedMetaKey)})
	big2 := decode("big2", map[string]string{"k": strings.Repeat("v", maxSharedMetaKey)})
	if !same(a.Metadata, b.Metadata) {
		t.Error("equal metadata is not shared")
	}
	if same(a.Metadata, c.Metadata) || same(e.Metadata, f.Metadata) {
		t.Error("different metadata is shared")
	}
	if same(big.Metadata, big2.Metadata) {
		t.Error("metadata over the size bound is shared")
	}
	for i := range maxSharedMaps + 10 {
		decode("n", map[string]string{"i": strconv.Itoa(i)})
	}
	if n := len(d.fix.sharedMeta); n > maxSharedMaps {
		t.Errorf("%d shared metadata maps, want at most %d", n, maxSharedMaps)
	}
}

// damaged returns copies of b truncated and with a byte changed.
func damaged(rnd *rand.Rand, b []byte) [][]byte {
	if len(b) == 0 {
		return nil
	}
	c := append([]byte(nil), b...)
	c[rnd.IntN(len(c))] ^= byte(1 + rnd.IntN(255))
	return [][]byte{b[:rnd.IntN(len(b))], c}
}

func FuzzResource(f *testing.F) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		b, err := marshalOptions.Marshal(randomResource(rnd))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x0a, 0x00, 0x0a, 0x00})            // the Id twice
	f.Add([]byte{0x2a, 0x04, 0x0a, 0x01, 'k', 0x12}) // a short map entry
	f.Add([]byte{0x0a, 0x02, 0x0a, 0xff})            // bad UTF-8 in the Uid
	f.Fuzz(func(t *testing.T, b []byte) {
		checkResource(t, b)
	})
}

func FuzzRangeDecoder(f *testing.F) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for range 20 {
		b, err := marshalOptions.Marshal(randomResource(rnd))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x2a, 0x00, 0x2a, 0x00})                  // two empty map entries
	f.Add([]byte{0x2a, 0x00, 0x22, 0x00, 0x2a, 0x00})      // map entries apart
	f.Add([]byte{0x2a, 0x04, 0x0a, 0x01, 'k', 0x12, 0x2a}) // a short map entry after a good one
	var d RangeDecoder
	f.Fuzz(func(t *testing.T, b []byte) {
		checkRange(t, &d, b)
	})
}

func FuzzWatchEvent(f *testing.F) {
	rnd := rand.New(rand.NewPCG(7, 8))
	for range 20 {
		b, err := marshalOptions.Marshal(randomEvent(rnd))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0x1a, 0x00, 0x1a, 0x00})       // EndOfSnapshot twice
	f.Add([]byte{0x0a, 0x02, 0x0a, 0x00, 0x12}) // an Upsert, then a short Delete
	var d Decoder
	f.Fuzz(func(t *testing.T, b []byte) {
		checkWatchEvent(t, &d, b)
	})
}

// TestInternerIsBounded checks that past maxInterned distinct Types a
// Decoder stops remembering them and still decodes every one right.
func TestInternerIsBounded(t *testing.T) {
	var d Decoder
	for i := range maxInterned + 10 {
		ev := &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: &pbresource.Resource{
			Id: &pbresource.ID{Name: "n", Type: &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: fmt.Sprint("K", i)}},
		}}}}
		b, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got := new(pbresource.WatchEvent)
		if err := d.WatchEvent(b, got); err != nil {
			t.Fatal(err)
		}
		clear(b)
		if !proto.Equal(got, ev) {
			t.Fatalf("decoded %v, want %v", got, ev)
		}
	}
	if n := len(d.in.types); n != maxInterned {
		t.Fatalf("the interner holds %d Types, want its bound %d", n, maxInterned)
	}
}
