package host

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/history"
	"github.com/loomrt/loom/storage/inmem"
)

// reflectionConn serves the ResourceService and reflection as `loom server`
// does, in process, and returns a connection to it.
func reflectionConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	registry := resource.NewRegistry()
	if err := foo.RegisterTypes(registry); err != nil {
		t.Fatal(err)
	}
	svc := server.New(server.Config{Backend: inmem.New(), Registry: registry})
	gs := grpc.NewServer()
	svc.Register(gs)
	history.New(svc).Register(gs)
	registerReflection(gs, nil)
	lis := bufconn.Listen(1 << 20)
	go gs.Serve(lis)
	t.Cleanup(func() { svc.Shutdown(); gs.Stop() })
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// describe asks the reflection service for the file defining symbol and,
// the way grpcurl does, for any file it depends on that did not come with
// it, then builds them all into descriptors.
func describe(t *testing.T, stream reflectionv1.ServerReflection_ServerReflectionInfoClient, symbol string) protoreflect.Descriptor {
	t.Helper()
	set := &descriptorpb.FileDescriptorSet{}
	have := map[string]bool{}
	add := func(req *reflectionv1.ServerReflectionRequest) {
		t.Helper()
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if e := resp.GetErrorResponse(); e != nil {
			t.Fatalf("reflection %v: %s", req.GetMessageRequest(), e.GetErrorMessage())
		}
		for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
			fdp := &descriptorpb.FileDescriptorProto{}
			if err := proto.Unmarshal(b, fdp); err != nil {
				t.Fatal(err)
			}
			if !have[fdp.GetName()] {
				have[fdp.GetName()] = true
				set.File = append(set.File, fdp)
			}
		}
	}
	add(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: symbol},
	})
	for i := 0; i < len(set.File); i++ {
		for _, dep := range set.File[i].GetDependency() {
			if !have[dep] {
				add(&reflectionv1.ServerReflectionRequest{
					MessageRequest: &reflectionv1.ServerReflectionRequest_FileByFilename{FileByFilename: dep},
				})
			}
		}
	}
	files, err := protodesc.NewFiles(set)
	if err != nil {
		t.Fatalf("building the files reflection returned for %s: %v", symbol, err)
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(symbol))
	if err != nil {
		t.Fatalf("%s is not in the files reflection returned: %v", symbol, err)
	}
	return d
}

// Reflection lists and describes the ResourceService and the example types
// although Loom's resource.proto is not in the global protobuf registry.
func TestReflectionDescribesResourceService(t *testing.T) {
	conn := reflectionConn(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()

	if err := stream.Send(&reflectionv1.ServerReflectionRequest{
		MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var services []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	if !slices.Contains(services, "hashicorp.consul.resource.ResourceService") {
		t.Errorf("reflection lists %v, want hashicorp.consul.resource.ResourceService among them", services)
	}

	svc, ok := describe(t, stream, "hashicorp.consul.resource.ResourceService").(protoreflect.ServiceDescriptor)
	if !ok {
		t.Fatal("ResourceService is not described as a service")
	}
	if got := svc.ParentFile().Path(); got != "pbresource/resource.proto" {
		t.Errorf("ResourceService is in %s, want pbresource/resource.proto", got)
	}
	watch := svc.Methods().ByName("WatchList")
	if svc.Methods().Len() != 8 || watch == nil || !watch.IsStreamingServer() || watch.Output().FullName() != "hashicorp.consul.resource.WatchEvent" {
		t.Errorf("ResourceService described with %d methods, WatchList %v", svc.Methods().Len(), watch)
	}
	data := svc.Methods().ByName("Read").Output().Fields().ByName("resource").Message().Fields().ByName("data")
	if data.Message().FullName() != "google.protobuf.Any" || data.Message().IsPlaceholder() {
		t.Errorf("Resource.data described as %v, want google.protobuf.Any", data.Message().FullName())
	}

	// Loom's history service, whose file imports pbresource/resource.proto.
	hist, ok := describe(t, stream, "loom.history.v1.HistoryService").(protoreflect.ServiceDescriptor)
	if !ok {
		t.Fatal("loom.history.v1.HistoryService is not described as a service")
	}
	restoreID := hist.Methods().ByName("Restore").Input().Fields().ByName("id").Message()
	if restoreID.FullName() != "hashicorp.consul.resource.ID" || restoreID.IsPlaceholder() {
		t.Errorf("RestoreRequest.id described as %v, want hashicorp.consul.resource.ID", restoreID.FullName())
	}

	// An example type: its import of pbresource/resource.proto is fetched by
	// file name, as grpcurl does.
	bar, ok := describe(t, stream, "loom.example.foo.v1.Bar").(protoreflect.MessageDescriptor)
	if !ok {
		t.Fatal("loom.example.foo.v1.Bar is not described as a message")
	}
	if qux := bar.Fields().ByName("qux").Message(); qux.FullName() != "hashicorp.consul.resource.ID" || qux.IsPlaceholder() {
		t.Errorf("Bar.qux described as %v, want hashicorp.consul.resource.ID", qux.FullName())
	}

	// v1alpha, which older grpcurl versions use, is served too.
	alpha, err := reflectionv1alpha.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer alpha.CloseSend()
	if err := alpha.Send(&reflectionv1alpha.ServerReflectionRequest{
		MessageRequest: &reflectionv1alpha.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "hashicorp.consul.resource.Tombstone"},
	}); err != nil {
		t.Fatal(err)
	}
	if resp, err := alpha.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("v1alpha reflection cannot describe Tombstone: %v %v", resp.GetErrorResponse(), err)
	}
}
