package resourcetest

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/grpc"
)

// holdFinalizer is the finalizer a Consul-like client adds, out of its
// callers' sight, to a resource it deletes while it has finalizers: Loom's
// server then keeps the resource, marked, when its callers remove their
// last finalizer, as Consul does, until a further Delete removes it.
const holdFinalizer = "resourcetest.consul-like/hold"

func hasHold(res *pbresource.Resource) bool {
	return slices.Contains(resource.Finalizers(res), holdFinalizer)
}

// withFinalizers returns a shallow copy of res with its own metadata and
// the given finalizers.
func withFinalizers(res *pbresource.Resource, names []string) *pbresource.Resource {
	out := &pbresource.Resource{Id: res.Id, Owner: res.Owner, Version: res.Version, Generation: res.Generation,
		Metadata: maps.Clone(res.Metadata), Status: res.Status, Data: res.Data}
	if out.Metadata == nil {
		out.Metadata = map[string]string{}
	}
	if len(names) == 0 {
		delete(out.Metadata, resource.FinalizerKey)
	} else {
		out.Metadata[resource.FinalizerKey] = strings.Join(names, " ")
	}
	return out
}

// hide returns res without the hold finalizer (res itself when it has none).
func hide(res *pbresource.Resource) *pbresource.Resource {
	if res == nil || !hasHold(res) {
		return res
	}
	return withFinalizers(res, slices.DeleteFunc(resource.Finalizers(res), func(f string) bool { return f == holdFinalizer }))
}

func hideAll(list []*pbresource.Resource) {
	for i, res := range list {
		list[i] = hide(res)
	}
}

func (c *consulClient) readStored(ctx context.Context, id *pbresource.ID) *pbresource.Resource {
	rsp, err := c.ResourceServiceClient.Read(ctx, &pbresource.ReadRequest{Id: &pbresource.ID{Type: id.Type, Tenancy: id.Tenancy, Name: id.Name}})
	if err != nil {
		return nil
	}
	return rsp.Resource
}

// Delete of a resource with finalizers first adds the hold finalizer, so
// that removing the others does not delete it; Delete of a marked resource
// whose only finalizer is the hold removes it, which deletes the resource.
func (c *consulClient) Delete(ctx context.Context, req *pbresource.DeleteRequest, opts ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	stored := c.readStored(ctx, req.GetId())
	sameUid := stored != nil && (req.GetId().GetUid() == "" || req.GetId().GetUid() == stored.Id.Uid)
	switch {
	case !sameUid:
	case resource.IsMarkedForDeletion(stored) && slices.Equal(resource.Finalizers(stored), []string{holdFinalizer}):
		if _, err := c.ResourceServiceClient.Write(ctx, &pbresource.WriteRequest{Resource: withFinalizers(stored, nil)}, opts...); err != nil {
			return nil, err
		}
		return &pbresource.DeleteResponse{}, nil
	case !resource.IsMarkedForDeletion(stored) && resource.HasFinalizers(stored) && !hasHold(stored) &&
		(req.GetVersion() == "" || req.GetVersion() == stored.Version):
		held := withFinalizers(stored, append(resource.Finalizers(stored), holdFinalizer))
		held.Status = nil
		if _, err := c.ResourceServiceClient.Write(ctx, &pbresource.WriteRequest{Resource: held}, opts...); err != nil {
			return nil, err
		}
		req = &pbresource.DeleteRequest{Id: req.Id} // the version was checked before the hold's write
	}
	return c.ResourceServiceClient.Delete(ctx, req, opts...)
}

// Write keeps the hold finalizer on a marked resource whose other
// finalizers the caller removes.
func (c *consulClient) Write(ctx context.Context, req *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	if res := req.GetResource(); resource.IsMarkedForDeletion(res) && !hasHold(res) {
		if stored := c.readStored(ctx, res.GetId()); stored != nil && hasHold(stored) {
			req = &pbresource.WriteRequest{Resource: withFinalizers(res, append(resource.Finalizers(res), holdFinalizer))}
		}
	}
	rsp, err := c.ResourceServiceClient.Write(ctx, req, opts...)
	if err != nil {
		return nil, err
	}
	rsp.Resource = hide(rsp.Resource)
	return rsp, nil
}

// WriteStatus hides the hold finalizer.
func (c *consulClient) WriteStatus(ctx context.Context, req *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	rsp, err := c.ResourceServiceClient.WriteStatus(ctx, req, opts...)
	if err != nil {
		return nil, err
	}
	rsp.Resource = hide(rsp.Resource)
	return rsp, nil
}

// Read hides the hold finalizer.
func (c *consulClient) Read(ctx context.Context, req *pbresource.ReadRequest, opts ...grpc.CallOption) (*pbresource.ReadResponse, error) {
	rsp, err := c.ResourceServiceClient.Read(ctx, req, opts...)
	if err != nil {
		return nil, err
	}
	rsp.Resource = hide(rsp.Resource)
	return rsp, nil
}

// ListByOwner hides the hold finalizer, and ignores page_size and
// page_token as Consul does (see ConsulLike).
func (c *consulClient) ListByOwner(ctx context.Context, req *pbresource.ListByOwnerRequest, opts ...grpc.CallOption) (*pbresource.ListByOwnerResponse, error) {
	rsp, err := c.ResourceServiceClient.ListByOwner(ctx, &pbresource.ListByOwnerRequest{Owner: req.GetOwner()}, opts...)
	if err != nil {
		return nil, err
	}
	rsp.Version = ""
	hideAll(rsp.Resources)
	return rsp, nil
}
