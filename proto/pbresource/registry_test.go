package pbresource_test

import (
	"errors"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/proto/pbresource"
)

const path = "pbresource/resource.proto"

// Loom's file and types stay out of the global registries, where Consul's
// copy of the same file would conflict with them.
func TestNotInGlobalRegistries(t *testing.T) {
	if _, err := protoregistry.GlobalFiles.FindFileByPath(path); !errors.Is(err, protoregistry.NotFound) {
		t.Errorf("GlobalFiles has %s (%v), want it in Loom's registry only", path, err)
	}
	for _, name := range []protoreflect.FullName{"hashicorp.consul.resource.Resource", "hashicorp.consul.resource.ResourceService"} {
		if _, err := protoregistry.GlobalFiles.FindDescriptorByName(name); !errors.Is(err, protoregistry.NotFound) {
			t.Errorf("GlobalFiles has %s (%v)", name, err)
		}
	}
	if _, err := protoregistry.GlobalTypes.FindMessageByName("hashicorp.consul.resource.Tombstone"); !errors.Is(err, protoregistry.NotFound) {
		t.Errorf("GlobalTypes has Tombstone (%v)", err)
	}
	if _, err := protoregistry.GlobalTypes.FindEnumByName("hashicorp.consul.resource.Condition.State"); !errors.Is(err, protoregistry.NotFound) {
		t.Errorf("GlobalTypes has Condition.State (%v)", err)
	}
}

func TestResolverFindsLoomsFile(t *testing.T) {
	fd, err := pbresource.Resolver.FindFileByPath(path)
	if err != nil {
		t.Fatal(err)
	}
	if fd != pbresource.File_pbresource_resource_proto {
		t.Errorf("Resolver's %s is not the generated package's", path)
	}
	// The imports are the real well-known files, not placeholders.
	for i := 0; i < fd.Imports().Len(); i++ {
		imp := fd.Imports().Get(i)
		global, err := protoregistry.GlobalFiles.FindFileByPath(imp.Path())
		if imp.IsPlaceholder() || err != nil || imp.FileDescriptor != global {
			t.Errorf("import %s is a placeholder or not the global registry's (%v)", imp.Path(), err)
		}
	}
	if fd.Imports().Len() != 2 {
		t.Errorf("%s has %d imports, want 2 (any.proto, timestamp.proto)", path, fd.Imports().Len())
	}
	// Fields of imported types resolve to the real descriptors.
	res := (&pbresource.Resource{}).ProtoReflect().Descriptor()
	if got := res.Fields().ByName("data").Message(); got != (&anypb.Any{}).ProtoReflect().Descriptor() {
		t.Errorf("Resource.data is %v, want google.protobuf.Any", got.FullName())
	}
	cond := (&pbresource.Condition{}).ProtoReflect().Descriptor()
	if got := cond.Fields().ByName("state").Enum(); got != pbresource.Condition_STATE_TRUE.Descriptor() {
		t.Errorf("Condition.state is %v, want the generated enum", got.FullName())
	}
	// The descriptor survives a round trip through its proto form, the way
	// gRPC reflection hands it out.
	if _, err := protodesc.NewFile(protodesc.ToFileDescriptorProto(fd), pbresource.Resolver); err != nil {
		t.Errorf("rebuilding %s from its proto form: %v", path, err)
	}
	svc, err := pbresource.Resolver.FindDescriptorByName("hashicorp.consul.resource.ResourceService")
	if err != nil || svc.ParentFile() != fd {
		t.Errorf("ResourceService: %v, %v", svc, err)
	}
}

func TestResolverFallsBackToGlobal(t *testing.T) {
	mt, err := pbresource.Resolver.FindMessageByURL("type.googleapis.com/google.protobuf.Timestamp")
	if err != nil || mt.Descriptor() != (&timestamppb.Timestamp{}).ProtoReflect().Descriptor() {
		t.Errorf("Timestamp: %v, %v", mt, err)
	}
	if _, err := pbresource.Resolver.FindFileByPath("google/protobuf/any.proto"); err != nil {
		t.Error(err)
	}
	if _, err := pbresource.Resolver.FindMessageByName("no.such.Message"); !errors.Is(err, protoregistry.NotFound) {
		t.Errorf("unknown message: got %v, want NotFound", err)
	}
}

// A Resource whose data is a Tombstone goes to JSON and back, and out of its
// Any, when given Resolver.
func TestTombstoneDataThroughResolver(t *testing.T) {
	owner := &pbresource.ID{Type: &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "k"}, Name: "n", Uid: "u"}
	data, err := anypb.New(&pbresource.Tombstone{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	res := &pbresource.Resource{Id: &pbresource.ID{Name: "t"}, Data: data}

	if _, err := protojson.Marshal(res); err == nil {
		t.Error("protojson found the Tombstone without Resolver; is it in the global registry?")
	}
	b, err := protojson.MarshalOptions{Resolver: pbresource.Resolver}.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back pbresource.Resource
	if err := (protojson.UnmarshalOptions{Resolver: pbresource.Resolver}).Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&back, res) {
		t.Errorf("JSON round trip: got %v, want %v", &back, res)
	}

	m, err := anypb.UnmarshalNew(data, proto.UnmarshalOptions{Resolver: pbresource.Resolver})
	if err != nil {
		t.Fatal(err)
	}
	if ts, ok := m.(*pbresource.Tombstone); !ok || !proto.Equal(ts.Owner, owner) {
		t.Errorf("UnmarshalNew = %T %v, want the Tombstone", m, m)
	}
}
