package resourcetest

import (
	"context"
	"sort"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// WriteTimeout bounds how long ResourceBuilder.Write keeps retrying writes
// that lost a compare-and-swap race (Aborted).
const WriteTimeout = 5 * time.Second

// ResourceBuilder declares a resource for a test. Start one with Resource
// (or Service.Resource), chain the With methods, then Build it or Write it
// to a ResourceService. The With methods change the builder and return it.
type ResourceBuilder struct {
	res      *pbresource.Resource
	statuses map[string]*pbresource.Status
	registry resource.Registry
}

// Resource starts declaring a resource of typ called name.
//
// Tenancy units left empty stay empty in Build and ID: the service fills
// them with the defaults of the type's scope when the resource is written,
// and accepts them empty in every request, so such an ID reads, waits for
// and deletes the right resource. To get the ID exactly as the service
// stores it before writing (to compare it with a mapper's requests, say),
// set the tenancy with WithTenancy, use Service.Resource, or bind the
// builder to the registry with WithRegistry. Write returns the stored
// resource, whose ID is always complete.
func Resource(typ *pbresource.Type, name string) *ResourceBuilder {
	id := &pbresource.ID{Name: name, Tenancy: &pbresource.Tenancy{}}
	if typ != nil {
		id.Type = proto.Clone(typ).(*pbresource.Type)
	}
	return &ResourceBuilder{res: &pbresource.Resource{Id: id}}
}

// ResourceID starts declaring a resource with the given ID (copied), for
// example one taken from a request or another resource.
func ResourceID(id *pbresource.ID) *ResourceBuilder {
	return &ResourceBuilder{res: &pbresource.Resource{Id: resource.CloneID(id)}}
}

// WithRegistry makes the builder fill empty tenancy units with the defaults
// of the type's scope as registered in reg, so that Build and ID return
// what the service will store. A type reg does not know is left alone.
func (b *ResourceBuilder) WithRegistry(reg resource.Registry) *ResourceBuilder {
	b.registry = reg
	return b
}

// WithTenancy sets the resource's tenancy (copied).
func (b *ResourceBuilder) WithTenancy(tenancy *pbresource.Tenancy) *ResourceBuilder {
	if tenancy == nil {
		tenancy = &pbresource.Tenancy{}
	}
	b.res.Id.Tenancy = proto.Clone(tenancy).(*pbresource.Tenancy)
	return b
}

// WithData sets the resource's data to msg, failing t if msg cannot be
// packed.
func (b *ResourceBuilder) WithData(t T, msg proto.Message) *ResourceBuilder {
	t.Helper()
	data, err := anypb.New(msg)
	if err != nil {
		fatalf(t, "resourcetest: packing the data of %s: %v", resource.IDString(b.res.Id), err)
	}
	b.res.Data = data
	return b
}

// WithOwner sets the resource's owner (copied).
func (b *ResourceBuilder) WithOwner(owner *pbresource.ID) *ResourceBuilder {
	b.res.Owner = resource.CloneID(owner)
	return b
}

// WithMeta sets one metadata key.
func (b *ResourceBuilder) WithMeta(key, value string) *ResourceBuilder {
	if b.res.Metadata == nil {
		b.res.Metadata = map[string]string{}
	}
	b.res.Metadata[key] = value
	return b
}

// WithStatus sets the status under key (copied). Write stores it with
// WriteStatus after writing the resource, filling an empty
// ObservedGeneration with the generation just written.
func (b *ResourceBuilder) WithStatus(key string, st *pbresource.Status) *ResourceBuilder {
	if b.statuses == nil {
		b.statuses = map[string]*pbresource.Status{}
	}
	b.statuses[key] = resource.CloneStatus(st)
	return b
}

// WithVersion sets the version, which makes Write a compare-and-swap write
// against that version.
func (b *ResourceBuilder) WithVersion(version string) *ResourceBuilder {
	b.res.Version = version
	return b
}

// WithGeneration sets the generation. The service picks generations itself,
// so this matters only for resources that are built, not written (for
// example ones put straight into a cache).
func (b *ResourceBuilder) WithGeneration(generation string) *ResourceBuilder {
	b.res.Generation = generation
	return b
}

// Build returns the declared resource, statuses included. Each call
// returns a new copy.
func (b *ResourceBuilder) Build() *pbresource.Resource {
	res := resource.Clone(b.res)
	res.Id = b.ID()
	for key, st := range b.statuses {
		if res.Status == nil {
			res.Status = map[string]*pbresource.Status{}
		}
		res.Status[key] = resource.CloneStatus(st)
	}
	return res
}

// ID returns the declared resource's ID (a copy). See Resource for when
// its empty tenancy units are filled in.
func (b *ResourceBuilder) ID() *pbresource.ID {
	id := resource.CloneID(b.res.Id)
	if b.registry == nil {
		return id
	}
	reg, ok := b.registry.Resolve(id.Type)
	if !ok {
		return id
	}
	if ten, err := resource.NormalizeTenancy("id.tenancy", reg.Scope, id.Tenancy, false); err == nil {
		id.Tenancy = ten
	}
	return id
}

// Reference returns a reference to a section of the declared resource
// ("" for the whole resource).
func (b *ResourceBuilder) Reference(section string) *pbresource.Reference {
	return resource.Reference(b.ID(), section)
}

// Write writes the resource through client and then each of its statuses
// (in key order) with WriteStatus, and returns the stored result. Like
// `loom apply`, it keeps the finalizers (and deletion mark) of a stored
// resource of the same name unless the builder sets them with WithMeta, so
// rewriting a resource in a test does not take away a controller's
// finalizer; it reads the stored resource first and writes with a
// compare-and-swap against it. A status
// write is a compare-and-swap against the version just written; when
// something else changed the resource meanwhile (a controller, say), it is
// retried against the new version until WriteTimeout. A blanket write that
// the service gives up on with Aborted is retried the same way; with
// WithVersion, Aborted is a real conflict and fails t at once, like any
// other error.
func (b *ResourceBuilder) Write(t T, client pbresource.ResourceServiceClient) *pbresource.Resource {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), WriteTimeout)
	defer cancel()

	res := b.Build()
	statuses := res.Status
	// Statuses belong to WriteStatus: the service refuses a Write that sets
	// one on creation or changes the stored one, and keeps them when the
	// Write leaves them out.
	res.Status = nil
	name := resource.IDString(res.Id)

	var written *pbresource.Resource
	blanket := res.Version == ""
	for {
		req, err := b.carryStored(ctx, client, res, blanket)
		if err != nil {
			fatalf(t, "resourcetest: writing %s: reading the stored resource: %v", name, err)
		}
		rsp, err := client.Write(ctx, req)
		if err == nil {
			written = rsp.Resource
			break
		}
		if status.Code(err) == codes.Aborted && blanket && ctx.Err() == nil {
			if !sleepCtx(ctx, 5*time.Millisecond) {
				fatalf(t, "resourcetest: writing %s: still conflicting after %s: %v", name, WriteTimeout, err)
			}
			continue
		}
		fatalf(t, "resourcetest: writing %s: %v", name, err)
	}

	keys := make([]string, 0, len(statuses))
	for key := range statuses {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		written = writeStatus(ctx, t, client, written, key, statuses[key])
	}
	return written
}

// carriedMetadata are the metadata keys Write keeps from the stored
// resource when the builder does not set them, as `loom apply` does: what
// controllers and Delete add, which a test rewriting a resource does not
// mean to take away.
var carriedMetadata = []string{resource.FinalizerKey, resource.DeletionTimestampKey}

// carryStored returns the Write request for res: res with the stored
// resource's carriedMetadata that the builder does not set. A blanket write
// (blanket) of a resource that exists becomes a compare-and-swap against
// the version read, so a finalizer a controller adds meanwhile is not lost
// (the conflict is retried); res itself is not changed.
func (b *ResourceBuilder) carryStored(ctx context.Context, client pbresource.ResourceServiceClient, res *pbresource.Resource, blanket bool) (*pbresource.WriteRequest, error) {
	name := &pbresource.ID{Type: res.Id.Type, Tenancy: res.Id.Tenancy, Name: res.Id.Name}
	read, err := client.Read(consistent(ctx), &pbresource.ReadRequest{Id: name})
	if status.Code(err) == codes.NotFound {
		return &pbresource.WriteRequest{Resource: res}, nil
	}
	if err != nil {
		return nil, err
	}
	stored := read.Resource
	out := resource.Clone(res)
	for _, k := range carriedMetadata {
		v, ok := stored.Metadata[k]
		if _, set := b.res.Metadata[k]; !ok || set {
			continue
		}
		if out.Metadata == nil {
			out.Metadata = map[string]string{}
		}
		out.Metadata[k] = v
	}
	if blanket {
		out.Version = stored.Version
	}
	return &pbresource.WriteRequest{Resource: out}, nil
}

// writeStatus stores st under key on res (as last written), retrying
// compare-and-swap conflicts, and returns the resource after the write.
func writeStatus(ctx context.Context, t T, client pbresource.ResourceServiceClient, res *pbresource.Resource, key string, st *pbresource.Status) *pbresource.Resource {
	t.Helper()
	st = resource.CloneStatus(st)
	fillGeneration := st.ObservedGeneration == ""
	for {
		if fillGeneration {
			st.ObservedGeneration = res.Generation
		}
		rsp, err := client.WriteStatus(ctx, &pbresource.WriteStatusRequest{
			Id:      res.Id,
			Version: res.Version,
			Key:     key,
			Status:  st,
		})
		if err == nil {
			return rsp.Resource
		}
		if status.Code(err) != codes.Aborted {
			fatalf(t, "resourcetest: writing status %q of %s: %v", key, resource.IDString(res.Id), err)
		}
		if !sleepCtx(ctx, 5*time.Millisecond) {
			fatalf(t, "resourcetest: writing status %q of %s: still conflicting after %s: %v", key, resource.IDString(res.Id), WriteTimeout, err)
		}
		read, rerr := client.Read(consistent(ctx), &pbresource.ReadRequest{Id: res.Id})
		if rerr != nil {
			fatalf(t, "resourcetest: writing status %q of %s: re-reading after a conflict: %v", key, resource.IDString(res.Id), rerr)
		}
		res = read.Resource
	}
}

// sleepCtx waits d, or less if ctx ends first; false when ctx ended.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
