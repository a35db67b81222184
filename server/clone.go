package server

import (
	"bytes"
	"maps"

	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/proto/pbresource"
)

// Field-by-field deep copies of the messages the in-process client passes
// across. They are several times cheaper than proto.Clone, which matters on
// the Read path. clone_test.go fills every field of every message by
// reflection and checks these copies against proto.Clone, so a field added
// to resource.proto without being added here fails the tests.

func cloneType(t *pbresource.Type) *pbresource.Type {
	if t == nil {
		return nil
	}
	return &pbresource.Type{Group: t.Group, GroupVersion: t.GroupVersion, Kind: t.Kind}
}

func cloneTenancy(t *pbresource.Tenancy) *pbresource.Tenancy {
	if t == nil {
		return nil
	}
	return &pbresource.Tenancy{Partition: t.Partition, Namespace: t.Namespace}
}

func cloneID(id *pbresource.ID) *pbresource.ID {
	if id == nil {
		return nil
	}
	return &pbresource.ID{Uid: id.Uid, Name: id.Name, Type: cloneType(id.Type), Tenancy: cloneTenancy(id.Tenancy)}
}

func cloneReference(r *pbresource.Reference) *pbresource.Reference {
	if r == nil {
		return nil
	}
	return &pbresource.Reference{Type: cloneType(r.Type), Tenancy: cloneTenancy(r.Tenancy), Name: r.Name, Section: r.Section}
}

func cloneCondition(c *pbresource.Condition) *pbresource.Condition {
	if c == nil {
		return nil
	}
	return &pbresource.Condition{Type: c.Type, State: c.State, Reason: c.Reason, Message: c.Message, Resource: cloneReference(c.Resource)}
}

func cloneStatus(s *pbresource.Status) *pbresource.Status {
	if s == nil {
		return nil
	}
	out := &pbresource.Status{ObservedGeneration: s.ObservedGeneration}
	if s.Conditions != nil {
		out.Conditions = make([]*pbresource.Condition, len(s.Conditions))
		for i, c := range s.Conditions {
			out.Conditions[i] = cloneCondition(c)
		}
	}
	if s.UpdatedAt != nil {
		out.UpdatedAt = &timestamppb.Timestamp{Seconds: s.UpdatedAt.Seconds, Nanos: s.UpdatedAt.Nanos}
	}
	return out
}

func cloneAny(a *anypb.Any) *anypb.Any {
	if a == nil {
		return nil
	}
	return &anypb.Any{TypeUrl: a.TypeUrl, Value: bytes.Clone(a.Value)}
}

func cloneResource(r *pbresource.Resource) *pbresource.Resource {
	if r == nil {
		return nil
	}
	out := &pbresource.Resource{
		Id:         cloneID(r.Id),
		Owner:      cloneID(r.Owner),
		Version:    r.Version,
		Generation: r.Generation,
		Metadata:   maps.Clone(r.Metadata),
		Data:       cloneAny(r.Data),
	}
	if r.Status != nil {
		out.Status = make(map[string]*pbresource.Status, len(r.Status))
		for k, v := range r.Status {
			out.Status[k] = cloneStatus(v)
		}
	}
	return out
}

func cloneResources(rs []*pbresource.Resource) []*pbresource.Resource {
	if rs == nil {
		return nil
	}
	out := make([]*pbresource.Resource, len(rs))
	for i, r := range rs {
		out[i] = cloneResource(r)
	}
	return out
}

func cloneWatchEvent(ev *pbresource.WatchEvent) *pbresource.WatchEvent {
	if ev == nil {
		return nil
	}
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		if e.Upsert == nil {
			return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{}}
		}
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{
			Upsert: &pbresource.WatchEvent_Upsert{Resource: cloneResource(e.Upsert.Resource)},
		}}
	case *pbresource.WatchEvent_Delete_:
		if e.Delete == nil {
			return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Delete_{}}
		}
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Delete_{
			Delete: &pbresource.WatchEvent_Delete{Resource: cloneResource(e.Delete.Resource)},
		}}
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
	return &pbresource.ReadRequest{Id: cloneID(r.Id)}
}

func cloneWriteRequest(r *pbresource.WriteRequest) *pbresource.WriteRequest {
	if r == nil {
		return nil
	}
	return &pbresource.WriteRequest{Resource: cloneResource(r.Resource)}
}

func cloneWriteStatusRequest(r *pbresource.WriteStatusRequest) *pbresource.WriteStatusRequest {
	if r == nil {
		return nil
	}
	return &pbresource.WriteStatusRequest{Id: cloneID(r.Id), Version: r.Version, Key: r.Key, Status: cloneStatus(r.Status)}
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
	return &pbresource.ListByOwnerRequest{Owner: cloneID(r.Owner)}
}

func cloneDeleteRequest(r *pbresource.DeleteRequest) *pbresource.DeleteRequest {
	if r == nil {
		return nil
	}
	return &pbresource.DeleteRequest{Id: cloneID(r.Id), Version: r.Version}
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
	return &pbresource.MutateAndValidateRequest{Resource: cloneResource(r.Resource)}
}
