package pblayout

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/proto/pbresource"
)

// TestLayoutMatchesDescriptors checks every message described here against
// its generated descriptor: each string field has its table entry, pointing
// at the Go field the generated code sets, and every other field is one of
// the numbered constants. A field added to resource.proto fails here.
func TestLayoutMatchesDescriptors(t *testing.T) {
	for _, c := range []struct {
		msg     proto.Message
		strings func(proto.Message) []*string
		others  map[protowire.Number]protoreflect.Name
	}{
		{
			msg: &pbresource.Resource{},
			strings: func(m proto.Message) []*string {
				s := ResourceStrings(m.(*pbresource.Resource))
				return s[:]
			},
			others: map[protowire.Number]protoreflect.Name{
				ResourceID: "id", ResourceOwner: "owner", ResourceMetadata: "metadata",
				ResourceStatus: "status", ResourceData: "data",
			},
		},
		{
			msg: &pbresource.ID{},
			strings: func(m proto.Message) []*string {
				s := IDStrings(m.(*pbresource.ID))
				return s[:]
			},
			others: map[protowire.Number]protoreflect.Name{IDType: "type", IDTenancy: "tenancy"},
		},
		{
			msg: &pbresource.Type{},
			strings: func(m proto.Message) []*string {
				s := TypeStrings(m.(*pbresource.Type))
				return s[:]
			},
		},
		{
			msg: &pbresource.Tenancy{},
			strings: func(m proto.Message) []*string {
				s := TenancyStrings(m.(*pbresource.Tenancy))
				return s[:]
			},
		},
		{
			msg: &pbresource.Status{},
			strings: func(m proto.Message) []*string {
				s := StatusStrings(m.(*pbresource.Status))
				return s[:]
			},
			others: map[protowire.Number]protoreflect.Name{StatusConditions: "conditions", StatusUpdatedAt: "updated_at"},
		},
		{
			msg: &pbresource.Condition{},
			strings: func(m proto.Message) []*string {
				s := ConditionStrings(m.(*pbresource.Condition))
				return s[:]
			},
			others: map[protowire.Number]protoreflect.Name{ConditionState: "state", ConditionResource: "resource"},
		},
		{
			msg: &pbresource.Reference{},
			strings: func(m proto.Message) []*string {
				s := ReferenceStrings(m.(*pbresource.Reference))
				return s[:]
			},
			others: map[protowire.Number]protoreflect.Name{ReferenceType: "type", ReferenceTenancy: "tenancy"},
		},
		{
			msg:     &timestamppb.Timestamp{},
			strings: func(proto.Message) []*string { return nil },
			others:  map[protowire.Number]protoreflect.Name{TimestampSeconds: "seconds", TimestampNanos: "nanos"},
		},
		{
			msg: &anypb.Any{},
			strings: func(m proto.Message) []*string {
				s := AnyStrings(m.(*anypb.Any))
				return s[:]
			},
			others: map[protowire.Number]protoreflect.Name{AnyValue: "value"},
		},
	} {
		m := c.msg.ProtoReflect()
		md := m.Descriptor()
		t.Run(string(md.Name()), func(t *testing.T) {
			table := c.strings(c.msg)
			fields := md.Fields()
			for i := range fields.Len() {
				fd := fields.Get(i)
				num := fd.Number()
				if fd.Kind() == protoreflect.StringKind && !fd.IsList() && !fd.IsMap() {
					if int(num) >= len(table) || table[num] == nil {
						t.Errorf("string field %s (%d) is missing from the table", fd.Name(), num)
						continue
					}
					want := "value of " + string(fd.Name())
					m.Set(fd, protoreflect.ValueOfString(want))
					if got := *table[num]; got != want {
						t.Errorf("table entry %d points at a field holding %q, want %s's %q", num, got, fd.Name(), want)
					}
					continue
				}
				if name, ok := c.others[num]; !ok || name != fd.Name() {
					t.Errorf("field %s (%d) is not described (constant names %q)", fd.Name(), num, name)
				}
			}
			for num, p := range table {
				if p == nil {
					continue
				}
				if fd := fields.ByNumber(protowire.Number(num)); fd == nil || fd.Kind() != protoreflect.StringKind {
					t.Errorf("table entry %d is not a string field", num)
				}
			}
			for num, name := range c.others {
				if fd := fields.ByNumber(num); fd == nil || fd.Name() != name {
					t.Errorf("constant %d names %s, which is not that field", num, name)
				}
			}
		})
	}
	events := (&pbresource.WatchEvent{}).ProtoReflect().Descriptor().Fields()
	for num, name := range map[protowire.Number]protoreflect.Name{
		WatchEventUpsert: "upsert", WatchEventDelete: "delete", WatchEventEndOfSnapshot: "end_of_snapshot",
		WatchEventNewSnapshot: "new_snapshot", WatchEventBookmark: "bookmark", WatchEventBatch: "batch",
	} {
		if fd := events.ByNumber(num); fd == nil || fd.Name() != name {
			t.Errorf("WatchEvent field %d is not %s", num, name)
		}
	}
	if n := events.Len(); n != 6 {
		t.Errorf("WatchEvent has %d fields, want the 6 described", n)
	}
	// Each event's own fields, by number.
	for event, want := range map[protoreflect.Name]map[protowire.Number]protoreflect.Name{
		"upsert":          {EventResource: "resource"},
		"delete":          {EventResource: "resource", DeleteVersion: "version"},
		"end_of_snapshot": {EndOfSnapshotVersion: "version"},
		"new_snapshot":    {},
		"bookmark":        {BookmarkVersion: "version"},
		"batch":           {BatchEvents: "events"},
	} {
		fields := events.ByName(event).Message().Fields()
		if fields.Len() != len(want) {
			t.Errorf("WatchEvent.%s has %d fields, want the %d described", event, fields.Len(), len(want))
		}
		for num, name := range want {
			if fd := fields.ByNumber(num); fd == nil || fd.Name() != name {
				t.Errorf("WatchEvent.%s field %d is not %s", event, num, name)
			}
		}
	}
	for num, name := range map[protowire.Number]protoreflect.Name{MapKey: "key", MapValue: "value"} {
		entry := (&pbresource.Resource{}).ProtoReflect().Descriptor().Fields().ByName("metadata").Message()
		if fd := entry.Fields().ByNumber(num); fd == nil || fd.Name() != name {
			t.Errorf("map entry field %d is not %s", num, name)
		}
	}
}

// TestCopyID checks IDBlock.CopyID against proto.Clone with every field set.
func TestCopyID(t *testing.T) {
	src := &pbresource.ID{}
	m := src.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Kind() == protoreflect.MessageKind {
			sub := m.Mutable(fd).Message()
			sf := sub.Descriptor().Fields()
			for j := range sf.Len() {
				sub.Set(sf.Get(j), protoreflect.ValueOfString(string(sf.Get(j).Name())))
			}
			continue
		}
		m.Set(fd, protoreflect.ValueOfString(string(fd.Name())))
	}
	var b IDBlock
	got := b.CopyID(src)
	if !proto.Equal(got, proto.Clone(src)) {
		t.Fatalf("CopyID gave %v, want %v", got, src)
	}
	if got.Type == src.Type || got.Tenancy == src.Tenancy {
		t.Fatal("CopyID shares a message with its source")
	}
	var empty IDBlock
	if got := empty.CopyID(&pbresource.ID{Name: "n"}); got.Type != nil || got.Tenancy != nil {
		t.Fatalf("CopyID set messages its source lacks: %v", got)
	}
}
