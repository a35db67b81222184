package etcd

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/proto/pbresource"
)

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
		res.Status[str()] = &pbresource.Status{
			ObservedGeneration: str(),
			Conditions: []*pbresource.Condition{{
				Type: str(), State: pbresource.Condition_STATE_TRUE, Reason: str(), Message: str(),
				Resource: &pbresource.Reference{Type: &pbresource.Type{Kind: str()}, Name: str()},
			}},
			UpdatedAt: timestamppb.New(timestamppb.Now().AsTime()),
		}
	}
	if rnd.IntN(4) > 0 {
		res.Data = &anypb.Any{TypeUrl: str(), Value: []byte(str())}
	}
	return res
}

// checkSameAsProto decodes b with unmarshalResource and proto.Unmarshal and
// fails unless both fail or both give equal messages.
func checkSameAsProto(t *testing.T, b []byte) {
	t.Helper()
	want := new(pbresource.Resource)
	wantErr := proto.Unmarshal(b, want)
	got, err := unmarshalResource(append([]byte(nil), b...))
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("unmarshalResource error %v, proto.Unmarshal error %v, input %x", err, wantErr, b)
	}
	if err == nil && !proto.Equal(want, got) {
		t.Fatalf("unmarshalResource gave %v, proto.Unmarshal %v, input %x", got, want, b)
	}
}

func TestUnmarshalResourceMatchesProto(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	fast := 0
	for range 2000 {
		res := randomResource(rnd)
		b, err := marshalOptions.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		checkSameAsProto(t, b)
		if _, ok := fastUnmarshal(b); ok {
			fast++
		}
		// Damaged copies: truncated, and with a byte changed.
		if len(b) > 0 {
			checkSameAsProto(t, b[:rnd.IntN(len(b))])
			c := append([]byte(nil), b...)
			c[rnd.IntN(len(c))] ^= byte(1 + rnd.IntN(255))
			checkSameAsProto(t, c)
		}
	}
	if fast < 1500 {
		t.Fatalf("only %d of 2000 resources took the fast path", fast)
	}

	// What the backend stores takes the fast path.
	stored, _, err := encode(benchResource("w"), "uid")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fastUnmarshal(stored); !ok {
		t.Fatal("a stored resource did not take the fast path")
	}
}

func FuzzUnmarshalResource(f *testing.F) {
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
		checkSameAsProto(t, b)
	})
}
