package controller

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Fencer is implemented by a Lease that gives fencing tokens: the key and
// the store revision that identify the current leadership term (the etcd
// Lease of storage/etcd does). ok is false when the lease is not held.
//
// When the Manager's Lease is a Fencer, each start of a singleton
// controller captures the token of the term it starts in, and every Write,
// WriteStatus and Delete the controller makes through its runtime client
// carries it (gRPC metadata resource.FenceMetadataKey). A server whose
// backend fences (etcd) then refuses those writes, with FailedPrecondition,
// once that term has ended — even if the controller has not noticed yet
// that it lost the lease, because its process was paused or its clock is
// off. When the term changes under a running controller (the lease was
// lost and won again quickly), the Manager restarts the controller so it
// takes the new term's token.
type Fencer interface {
	Fence() (key string, rev int64, ok bool)
}

// fencedClient is a ResourceServiceClient that adds a fencing token to the
// metadata of every call that writes.
type fencedClient struct {
	pbresource.ResourceServiceClient
	value string // resource.FormatFence of the term
}

func newFencedClient(c pbresource.ResourceServiceClient, key string, rev int64) *fencedClient {
	return &fencedClient{ResourceServiceClient: c, value: resource.FormatFence(key, rev)}
}

// fence sets the token on ctx's outgoing metadata, replacing one already
// there (the server refuses a request with two).
func (c *fencedClient) fence(ctx context.Context) context.Context {
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		return metadata.AppendToOutgoingContext(ctx, resource.FenceMetadataKey, c.value)
	}
	md = md.Copy()
	md.Set(resource.FenceMetadataKey, c.value)
	return metadata.NewOutgoingContext(ctx, md)
}

func (c *fencedClient) Write(ctx context.Context, in *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	return c.ResourceServiceClient.Write(c.fence(ctx), in, opts...)
}

func (c *fencedClient) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	return c.ResourceServiceClient.WriteStatus(c.fence(ctx), in, opts...)
}

func (c *fencedClient) Delete(ctx context.Context, in *pbresource.DeleteRequest, opts ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	return c.ResourceServiceClient.Delete(c.fence(ctx), in, opts...)
}
