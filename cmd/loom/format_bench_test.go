package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// benchResources are n foo.v1.Bar resources with a status, as a server
// lists them.
func benchResources(b *testing.B, n int) []*pbresource.Resource {
	b.Helper()
	list := make([]*pbresource.Resource, n)
	for i := range list {
		data, err := anypb.New(&pbfoov1.Bar{Baz: fmt.Sprintf("value %d", i)})
		if err != nil {
			b.Fatal(err)
		}
		gen := resource.NewULID()
		list[i] = &pbresource.Resource{
			Id:         &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: fmt.Sprintf("bar-%04d", i), Uid: resource.NewULID()},
			Version:    fmt.Sprint(i + 1),
			Generation: gen,
			Metadata:   map[string]string{resource.FinalizerKey: "foo.bar/cleanup"},
			Status: map[string]*pbresource.Status{"foo.bar": {ObservedGeneration: gen, UpdatedAt: timestamppb.Now(), Conditions: []*pbresource.Condition{
				{Type: "Accepted", State: pbresource.Condition_STATE_TRUE, Reason: "Ok", Message: "the bar is valid"},
			}}},
			Data: data,
		}
	}
	return list
}

// BenchmarkPrintList prints a list of 1,000 resources whose data type comes
// from a protoset (a dynamicpb type, as with reflection), in each format.
func BenchmarkPrintList(b *testing.B) {
	fd := (&pbfoov1.Bar{}).ProtoReflect().Descriptor().ParentFile()
	files, err := protodesc.NewFiles(fileSet(fd))
	if err != nil {
		b.Fatal(err)
	}
	types := &typeResolver{ctx: context.Background(), protoset: files, noServer: errors.New("none")}
	list := benchResources(b, 1000)
	for _, format := range []string{formatTable, formatJSON, formatYAML, formatName} {
		b.Run(format, func(b *testing.B) {
			p := &printer{format: format, types: types, stdout: io.Discard, stderr: io.Discard, now: time.Now, warned: map[string]bool{}}
			for b.Loop() {
				if err := p.printResources(list, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// fileSet is fd and every file it imports, as a protoset holds them.
func fileSet(fd protoreflect.FileDescriptor) *descriptorpb.FileDescriptorSet {
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var add func(protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		if f.IsPlaceholder() {
			// resource.proto is in Loom's own registry, not the global
			// one the generated code resolved imports in.
			if real, err := pbresource.Resolver.FindFileByPath(f.Path()); err == nil {
				f = real
			}
		}
		seen[f.Path()] = true
		for i := 0; i < f.Imports().Len(); i++ {
			add(f.Imports().Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	add(fd)
	return set
}
