package host

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	"github.com/loomrt/loom/proto/pbresource"
)

// registerReflection serves gRPC server reflection (v1 and v1alpha, as
// reflection.Register does), describing messages through
// pbresource.Resolver: Loom's resource.proto is not in protobuf-go's global
// registry, where reflection.Register would look for it.
func registerReflection(gs *grpc.Server) {
	opts := reflection.ServerOptions{
		Services:           gs,
		DescriptorResolver: pbresource.Resolver,
		ExtensionResolver:  pbresource.Resolver,
	}
	reflectionv1.RegisterServerReflectionServer(gs, reflection.NewServerV1(opts))
	reflectionv1alpha.RegisterServerReflectionServer(gs, reflection.NewServer(opts))
}
