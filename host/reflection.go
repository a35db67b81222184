package host

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/reflection"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// registerReflection serves gRPC server reflection (v1 and v1alpha, as
// reflection.Register does), describing messages through
// pbresource.Resolver: Loom's resource.proto is not in protobuf-go's global
// registry, where reflection.Register would look for it.
//
// With ACLs on (resolve not nil), a caller needs a token with the
// reflection capability (resource.CapabilityReflection; an ACL-file rule
// {capability: reflection}): without a token it is Unauthenticated, without
// the capability PermissionDenied, before anything is described.
func registerReflection(gs *grpc.Server, resolve func(context.Context) (resource.Authorizer, error)) {
	opts := reflection.ServerOptions{
		Services:           gs,
		DescriptorResolver: pbresource.Resolver,
		ExtensionResolver:  pbresource.Resolver,
	}
	var v1 reflectionv1.ServerReflectionServer = reflection.NewServerV1(opts)
	var v1alpha reflectionv1alpha.ServerReflectionServer = reflection.NewServer(opts)
	if resolve != nil {
		v1 = guardedReflection{v1, resolve}
		v1alpha = guardedReflectionV1Alpha{v1alpha, resolve}
	}
	reflectionv1.RegisterServerReflectionServer(gs, v1)
	reflectionv1alpha.RegisterServerReflectionServer(gs, v1alpha)
}

// mayReflect returns nil when the caller of ctx may use reflection, else
// the status to end the stream with.
func mayReflect(ctx context.Context, resolve func(context.Context) (resource.Authorizer, error)) error {
	authz, err := resolve(ctx)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return err
		}
		return status.Errorf(codes.Internal, "resolving the caller's ACLs: %v", err)
	}
	if !resource.HasCapability(authz, resource.CapabilityReflection) {
		return status.Error(codes.PermissionDenied, "gRPC reflection needs a token with the reflection capability (an ACL-file rule {capability: reflection})")
	}
	return nil
}

// guardedReflection serves v1 reflection to callers mayReflect lets
// through.
type guardedReflection struct {
	reflectionv1.ServerReflectionServer
	resolve func(context.Context) (resource.Authorizer, error)
}

func (g guardedReflection) ServerReflectionInfo(stream reflectionv1.ServerReflection_ServerReflectionInfoServer) error {
	if err := mayReflect(stream.Context(), g.resolve); err != nil {
		return err
	}
	return g.ServerReflectionServer.ServerReflectionInfo(stream)
}

// guardedReflectionV1Alpha is guardedReflection for v1alpha.
type guardedReflectionV1Alpha struct {
	reflectionv1alpha.ServerReflectionServer
	resolve func(context.Context) (resource.Authorizer, error)
}

func (g guardedReflectionV1Alpha) ServerReflectionInfo(stream reflectionv1alpha.ServerReflection_ServerReflectionInfoServer) error {
	if err := mayReflect(stream.Context(), g.resolve); err != nil {
		return err
	}
	return g.ServerReflectionServer.ServerReflectionInfo(stream)
}
