package server

import (
	"bytes"
	"context"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// MutateAndValidate runs the checks a Write would run on the resource by
// itself (ID, tenancy, data, owner format, the limits on metadata and size)
// and the type's Mutate and Validate hooks, and returns the mutated
// resource without storing it. Nothing about the stored state is checked
// (owner existence, versions, status), but for its ACLs: as on Write, a
// resource stored under the name in another GroupVersion must be writable
// as that type too.
func (s *Server) MutateAndValidate(ctx context.Context, req *pbresource.MutateAndValidateRequest) (*pbresource.MutateAndValidateResponse, error) {
	authz, err := s.authorizer(ctx)
	if err != nil {
		return nil, s.fail("MutateAndValidate", req.GetResource().GetId(), err)
	}
	res := new(pbresource.Resource)
	reg, _, err := s.checkWrite(authz, req.GetResource(), res)
	if err != nil {
		return nil, s.fail("MutateAndValidate", req.GetResource().GetId(), err)
	}
	stored, err := s.readStored(ctx, storage.EventualConsistency, res.Id)
	if err != nil {
		return nil, s.fail("MutateAndValidate", res.Id, storageError(err))
	}
	if stored != nil && !sameGroupVersion(res.Id, stored) {
		if err := s.authorizeWriteAsStored(authz, reg, stored); err != nil {
			return nil, s.fail("MutateAndValidate", res.Id, err)
		}
	}
	return &pbresource.MutateAndValidateResponse{Resource: res}, nil
}

// checkWrite runs the checks of in that need neither the stored resource
// nor the request's context: prepare, the limits against nothing stored
// and the write ACL of authz. res, which must be new, becomes the
// server's copy of in (see prepare).
func (s *Server) checkWrite(authz resource.Authorizer, in, res *pbresource.Resource) (resource.Registered, proto.Message, error) {
	reg, data, err := s.prepare(in, res)
	if err != nil {
		return reg, nil, err
	}
	if err := s.limits.checkMetadata(res.Metadata, nil); err != nil {
		return reg, nil, err
	}
	if err := s.limits.checkSize(res, nil, ""); err != nil {
		return reg, nil, err
	}
	return reg, data, aclError(reg.AuthorizeWrite(authz, res, data))
}

// prepare validates the resource of a Write as far as it can without
// looking at storage, and runs the type's Mutate and Validate hooks on it.
// It makes res, which must be new, the server's own copy of the resource
// (tenancy normalized, type URL canonical, mutated), and returns the type's
// registration and the decoded data.
//
// The copy is shallow: it shares what neither the server nor a hook changes
// with in, which is never changed. Data is decoded once; after Mutate it is
// encoded again, deterministically, and replaces the request's only when it
// differs, so a Mutate that changes nothing never makes a write look like a
// change.
func (s *Server) prepare(in, res *pbresource.Resource) (resource.Registered, proto.Message, error) {
	if in == nil {
		return resource.Registered{}, nil, invalidArgument(resource.ErrInvalidField{Name: "resource", Wrapped: resource.ErrMissing})
	}
	reg, id, err := s.checkID("id", in.Id)
	if err != nil {
		return reg, nil, err
	}
	if resource.EqualUnversionedType(id.Type, resource.TypeV1Tombstone) {
		return reg, nil, invalidField("id.type", "%s resources are written by the service itself when a resource that owns others is deleted; clients cannot write them (they may read, list, watch and delete them)",
			resource.TypeString(id.Type))
	}
	anyData, data, err := checkData(reg, in.Data)
	if err != nil {
		return reg, nil, err
	}
	owner := in.Owner
	if owner != nil {
		if owner, err = s.checkOwner(owner); err != nil {
			return reg, nil, err
		}
	}
	res.Id, res.Owner, res.Data = id, owner, anyData
	res.Version, res.Generation = in.Version, in.Generation
	res.Metadata, res.Status = in.Metadata, in.Status
	if reg.HasMutate() {
		if data, err = s.mutate(reg, res, data); err != nil {
			return reg, nil, err
		}
	}
	if err := reg.Validate(res, data); err != nil {
		return reg, nil, hookError(err)
	}
	return reg, data, nil
}

// mutate runs reg's Mutate hook on res, the server's copy of a request's
// resource, and returns the mutated data. The hook gets copies of the parts
// of the request it may change in place (ID, owner, metadata).
func (s *Server) mutate(reg resource.Registered, res *pbresource.Resource, data proto.Message) (proto.Message, error) {
	res.Id = resource.CloneID(res.Id)
	res.Owner = resource.CloneID(res.Owner)
	res.Metadata = maps.Clone(res.Metadata)
	key, owner := idKeyOf(res.Id), res.Owner
	var ownerKey idKey
	if owner != nil {
		ownerKey = idKeyOf(owner)
	}
	anyData := res.Data

	data, err := reg.Mutate(res, data)
	if err != nil {
		return nil, hookError(err)
	}
	if res.Id == nil || idKeyOf(res.Id) != key {
		return nil, status.Errorf(codes.Internal, "%s: %v", resource.TypeString(reg.Type), errMutatedID)
	}
	if data == nil || !data.ProtoReflect().IsValid() || data.ProtoReflect().Descriptor().FullName() != reg.MessageName() {
		return nil, status.Errorf(codes.Internal, "%s: the Mutate hook left Data without a %s message", resource.TypeString(reg.Type), reg.MessageName())
	}
	encoded, err := proto.MarshalOptions{Deterministic: true}.Marshal(data)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%s: encoding the data the Mutate hook returned: %v", resource.TypeString(reg.Type), err)
	}
	res.Data = anyData
	if !bytes.Equal(encoded, anyData.Value) {
		res.Data = &anypb.Any{TypeUrl: anyData.TypeUrl, Value: encoded}
	}
	if res.Owner != nil && (res.Owner != owner || idKeyOf(res.Owner) != ownerKey) {
		if res.Owner, err = s.checkOwner(res.Owner); err != nil {
			return nil, err
		}
	}
	return data, nil
}

// idKey is a comparable copy of an ID's fields.
type idKey struct {
	uid, name, group, version, kind, partition, namespace string
}

func idKeyOf(id *pbresource.ID) idKey {
	return idKey{
		uid: id.GetUid(), name: id.GetName(),
		group: id.GetType().GetGroup(), version: id.GetType().GetGroupVersion(), kind: id.GetType().GetKind(),
		partition: id.GetTenancy().GetPartition(), namespace: id.GetTenancy().GetNamespace(),
	}
}
