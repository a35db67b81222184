package etcd

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
)

// TestUnmarshalStoredResource checks that a stored resource decodes to what
// was stored, in the few allocations of internal/pbdecode's fast path (the
// generic decoder makes some two dozen), which pbdecode's tests check
// against the generic decoder.
func TestUnmarshalStoredResource(t *testing.T) {
	res := benchResource("w")
	stored, _, err := encode(res, "uid")
	if err != nil {
		t.Fatal(err)
	}
	want := new(pbresource.Resource)
	if err := proto.Unmarshal(stored, want); err != nil {
		t.Fatal(err)
	}
	got, err := unmarshalResource(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatalf("decoded %v, want %v", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = unmarshalResource(stored) }); n > 6 {
		t.Fatalf("decoding a stored resource took %v allocations; the fast path takes at most 6", n)
	}
}
