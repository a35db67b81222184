package consul_test

import (
	"testing"

	consulpb "github.com/hashicorp/consul/proto-public/pbresource"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
)

const resourceProto = "pbresource/resource.proto"

// This test binary links Consul's pbresource and Loom's, both generated from
// a pbresource/resource.proto declaring hashicorp.consul.resource.*; it got
// as far as running tests, so neither panicked at init. Consul's file and
// types are in the global registries, Loom's in its own.
func TestBothLinked(t *testing.T) {
	global, err := protoregistry.GlobalFiles.FindFileByPath(resourceProto)
	if err != nil || global != consulpb.File_pbresource_resource_proto {
		t.Errorf("GlobalFiles' %s is not Consul's (%v)", resourceProto, err)
	}
	loom, err := pbresource.Resolver.FindFileByPath(resourceProto)
	if err != nil || loom != pbresource.File_pbresource_resource_proto {
		t.Errorf("pbresource.Resolver's %s is not Loom's (%v)", resourceProto, err)
	}

	const tombstone = "type.googleapis.com/hashicorp.consul.resource.Tombstone"
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(tombstone)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mt.New().Interface().(*consulpb.Tombstone); !ok {
		t.Errorf("GlobalTypes' Tombstone is a %T, want Consul's", mt.New().Interface())
	}
	mt, err = pbresource.Resolver.FindMessageByURL(tombstone)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mt.New().Interface().(*pbresource.Tombstone); !ok {
		t.Errorf("pbresource.Resolver's Tombstone is a %T, want Loom's", mt.New().Interface())
	}

	// Names only Consul's package has still resolve through Loom's Resolver.
	if _, err := pbresource.Resolver.FindDescriptorByName("hashicorp.consul.resource.ResourceTypeSpec"); err != nil {
		t.Errorf("Consul's ResourceTypeSpec through pbresource.Resolver: %v", err)
	}
	// Loom's file imports the real well-known files.
	for i := 0; i < loom.Imports().Len(); i++ {
		if imp := loom.Imports().Get(i); imp.IsPlaceholder() {
			t.Errorf("Loom's %s imports a placeholder %s", resourceProto, imp.Path())
		}
	}
}

// Every message, field, enum value and method of Consul's resource.proto is
// in Loom's with the same name, number and type: Loom only adds.
func TestLoomsSchemaIsASupersetOfConsuls(t *testing.T) {
	consul := consulpb.File_pbresource_resource_proto
	var messages func(protoreflect.MessageDescriptors)
	messages = func(mds protoreflect.MessageDescriptors) {
		for i := 0; i < mds.Len(); i++ {
			cm := mds.Get(i)
			d, err := pbresource.Resolver.FindDescriptorByName(cm.FullName())
			lm, ok := d.(protoreflect.MessageDescriptor)
			if err != nil || !ok || lm.ParentFile() != pbresource.File_pbresource_resource_proto {
				t.Errorf("message %s: not in Loom's resource.proto (%v)", cm.FullName(), err)
				continue
			}
			for j := 0; j < cm.Fields().Len(); j++ {
				cf := cm.Fields().Get(j)
				lf := lm.Fields().ByNumber(cf.Number())
				if lf == nil || !sameField(cf, lf) {
					t.Errorf("field %s = %d: Loom has %v", cf.FullName(), cf.Number(), lf)
				}
			}
			for j := 0; j < cm.Enums().Len(); j++ {
				ce := cm.Enums().Get(j)
				d, err := pbresource.Resolver.FindDescriptorByName(ce.FullName())
				le, ok := d.(protoreflect.EnumDescriptor)
				if err != nil || !ok {
					t.Errorf("enum %s: not in Loom's (%v)", ce.FullName(), err)
					continue
				}
				for k := 0; k < ce.Values().Len(); k++ {
					cv := ce.Values().Get(k)
					if lv := le.Values().ByNumber(cv.Number()); lv == nil || lv.Name() != cv.Name() {
						t.Errorf("enum value %s = %d: Loom has %v", cv.FullName(), cv.Number(), lv)
					}
				}
			}
			messages(cm.Messages())
		}
	}
	messages(consul.Messages())

	cs := consul.Services().ByName("ResourceService")
	d, err := pbresource.Resolver.FindDescriptorByName(cs.FullName())
	if err != nil {
		t.Fatal(err)
	}
	ls := d.(protoreflect.ServiceDescriptor)
	for i := 0; i < cs.Methods().Len(); i++ {
		cm := cs.Methods().Get(i)
		lm := ls.Methods().ByName(cm.Name())
		if lm == nil || lm.Input().FullName() != cm.Input().FullName() || lm.Output().FullName() != cm.Output().FullName() ||
			lm.IsStreamingClient() != cm.IsStreamingClient() || lm.IsStreamingServer() != cm.IsStreamingServer() {
			t.Errorf("method %s: Loom has %v", cm.FullName(), lm)
		}
	}
}

func sameField(c, l protoreflect.FieldDescriptor) bool {
	if c.Name() != l.Name() || c.Kind() != l.Kind() || c.Cardinality() != l.Cardinality() || c.IsMap() != l.IsMap() {
		return false
	}
	if (c.ContainingOneof() == nil) != (l.ContainingOneof() == nil) {
		return false
	}
	switch {
	case c.Message() != nil:
		return l.Message() != nil && c.Message().FullName() == l.Message().FullName()
	case c.Enum() != nil:
		return l.Enum() != nil && c.Enum().FullName() == l.Enum().FullName()
	}
	return true
}

// Loom's history service links beside Consul's pbresource too: its messages
// hold Loom's resource types, and marshal as such.
func TestHistoryLinked(t *testing.T) {
	rev := &pbhistoryv1.Revision{Resource: &pbresource.Resource{Id: &pbresource.ID{Name: "x"}}, Version: "7"}
	b, err := proto.Marshal(rev)
	if err != nil {
		t.Fatal(err)
	}
	var got pbhistoryv1.Revision
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.GetResource().GetId().GetName() != "x" || got.Version != "7" {
		t.Errorf("round trip gave %v", &got)
	}
	id := pbhistoryv1.File_pbhistory_v1_history_proto.Messages().ByName("RestoreRequest").Fields().ByName("id").Message()
	if id.FullName() != "hashicorp.consul.resource.ID" || id.IsPlaceholder() {
		t.Errorf("RestoreRequest.id is %v", id.FullName())
	}
}
