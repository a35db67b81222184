package server

import (
	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Deep copies of the requests and watch events the in-process client passes
// across. The resources, IDs and statuses inside them are copied with the
// resource package's field-by-field clones, several times cheaper than
// proto.Clone; what is left here are the wrappers. clone_test.go fills
// every field of every request by reflection and compares these copies with
// the originals, so a field added to resource.proto and forgotten here fails
// the tests.

func cloneType(t *pbresource.Type) *pbresource.Type {
	if t == nil {
		return nil
	}
	out := new(pbresource.Type)
	pblayout.CopyType(out, t)
	return out
}

func cloneTenancy(t *pbresource.Tenancy) *pbresource.Tenancy {
	if t == nil {
		return nil
	}
	out := new(pbresource.Tenancy)
	pblayout.CopyTenancy(out, t)
	return out
}

func cloneResources(rs []*pbresource.Resource) []*pbresource.Resource {
	if rs == nil {
		return nil
	}
	out := make([]*pbresource.Resource, len(rs))
	for i, r := range rs {
		out[i] = resource.Clone(r)
	}
	return out
}

// upsertBlock and deleteBlock hold the three messages that wrap a copied
// event's resource, so they cost one allocation instead of three.
type upsertBlock struct {
	ev     pbresource.WatchEvent
	oneof  pbresource.WatchEvent_Upsert_
	upsert pbresource.WatchEvent_Upsert
}

type deleteBlock struct {
	ev     pbresource.WatchEvent
	oneof  pbresource.WatchEvent_Delete_
	delete pbresource.WatchEvent_Delete
}

func cloneWatchEvent(ev *pbresource.WatchEvent) *pbresource.WatchEvent {
	if ev == nil {
		return nil
	}
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		b := new(upsertBlock)
		b.ev.Event = &b.oneof
		if e.Upsert != nil {
			b.oneof.Upsert = &b.upsert
			b.upsert.Resource = resource.Clone(e.Upsert.Resource)
		}
		return &b.ev
	case *pbresource.WatchEvent_Delete_:
		b := new(deleteBlock)
		b.ev.Event = &b.oneof
		if e.Delete != nil {
			b.oneof.Delete = &b.delete
			b.delete.Resource = resource.Clone(e.Delete.Resource)
		}
		return &b.ev
	case *pbresource.WatchEvent_EndOfSnapshot_:
		if e.EndOfSnapshot == nil {
			return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{}}
		}
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{
			EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{},
		}}
	}
	return &pbresource.WatchEvent{}
}

func cloneReadRequest(r *pbresource.ReadRequest) *pbresource.ReadRequest {
	if r == nil {
		return nil
	}
	return &pbresource.ReadRequest{Id: resource.CloneID(r.Id)}
}

func cloneWriteRequest(r *pbresource.WriteRequest) *pbresource.WriteRequest {
	if r == nil {
		return nil
	}
	return &pbresource.WriteRequest{Resource: resource.Clone(r.Resource)}
}

func cloneWriteStatusRequest(r *pbresource.WriteStatusRequest) *pbresource.WriteStatusRequest {
	if r == nil {
		return nil
	}
	return &pbresource.WriteStatusRequest{Id: resource.CloneID(r.Id), Version: r.Version, Key: r.Key, Status: resource.CloneStatus(r.Status)}
}

func cloneListRequest(r *pbresource.ListRequest) *pbresource.ListRequest {
	if r == nil {
		return nil
	}
	return &pbresource.ListRequest{Type: cloneType(r.Type), Tenancy: cloneTenancy(r.Tenancy), NamePrefix: r.NamePrefix}
}

func cloneListByOwnerRequest(r *pbresource.ListByOwnerRequest) *pbresource.ListByOwnerRequest {
	if r == nil {
		return nil
	}
	return &pbresource.ListByOwnerRequest{Owner: resource.CloneID(r.Owner)}
}

func cloneDeleteRequest(r *pbresource.DeleteRequest) *pbresource.DeleteRequest {
	if r == nil {
		return nil
	}
	return &pbresource.DeleteRequest{Id: resource.CloneID(r.Id), Version: r.Version}
}

func cloneWatchListRequest(r *pbresource.WatchListRequest) *pbresource.WatchListRequest {
	if r == nil {
		return nil
	}
	return &pbresource.WatchListRequest{Type: cloneType(r.Type), Tenancy: cloneTenancy(r.Tenancy), NamePrefix: r.NamePrefix}
}

func cloneMutateAndValidateRequest(r *pbresource.MutateAndValidateRequest) *pbresource.MutateAndValidateRequest {
	if r == nil {
		return nil
	}
	return &pbresource.MutateAndValidateRequest{Resource: resource.Clone(r.Resource)}
}
