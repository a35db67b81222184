package server

import (
	"bytes"
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// MutateAndValidate runs the checks a Write would run on the resource by
// itself (ID, tenancy, data, owner format, the limits on metadata and size)
// and the type's Mutate and Validate hooks, and returns the mutated
// resource without storing it. Nothing about the stored state is checked
// (owner existence, versions, status).
func (s *Server) MutateAndValidate(ctx context.Context, req *pbresource.MutateAndValidateRequest) (*pbresource.MutateAndValidateResponse, error) {
	authz, err := s.authorizer(ctx)
	if err != nil {
		return nil, s.fail("MutateAndValidate", req.GetResource().GetId(), err)
	}
	res := req.GetResource()
	reg, _, err := s.prepare(res)
	if err != nil {
		return nil, s.fail("MutateAndValidate", res.GetId(), err)
	}
	// The limits a Write would check against nothing stored yet.
	if err := s.limits.checkMetadata(res.Metadata, nil); err != nil {
		return nil, s.fail("MutateAndValidate", res.GetId(), err)
	}
	if err := s.limits.checkSize(res, nil, ""); err != nil {
		return nil, s.fail("MutateAndValidate", res.GetId(), err)
	}
	if err := aclError(reg.AuthorizeWrite(authz, res)); err != nil {
		return nil, s.fail("MutateAndValidate", res.GetId(), err)
	}
	return &pbresource.MutateAndValidateResponse{Resource: res}, nil
}

// prepare validates res as a Write would before looking at storage, runs
// the Mutate and Validate hooks on it (in place), and returns the type's
// registration and the decoded data of the mutated resource.
func (s *Server) prepare(res *pbresource.Resource) (resource.Registration, proto.Message, error) {
	if res == nil {
		return resource.Registration{}, nil, invalidArgument(resource.ErrInvalidField{Name: "resource", Wrapped: resource.ErrMissing})
	}
	reg, err := s.checkID("id", res.Id)
	if err != nil {
		return reg, nil, err
	}
	if resource.EqualUnversionedType(res.Id.Type, resource.TypeV1Tombstone) {
		return reg, nil, invalidField("id.type", "%s resources are written by the service itself when a resource that owns others is deleted; clients cannot write them (they may read, list, watch and delete them)",
			resource.TypeString(res.Id.Type))
	}
	data, err := checkData(reg, res.Data)
	if err != nil {
		return reg, nil, err
	}
	if res.Owner != nil {
		if err := s.checkOwner(res.Owner); err != nil {
			return reg, nil, err
		}
	}

	if reg.Mutate != nil {
		id := res.Id
		key := idKeyOf(id)
		owner := res.Owner
		before := res.Data
		beforeValue := before.GetValue()

		if err := reg.Mutate(res); err != nil {
			return reg, nil, hookError(err)
		}

		if res.Id != id || idKeyOf(id) != key {
			return reg, nil, status.Errorf(codes.Internal, "%s: %v", resource.TypeString(reg.Type), errMutatedID)
		}
		if res.Data != before || !bytes.Equal(res.Data.GetValue(), beforeValue) {
			if data, err = checkData(reg, res.Data); err != nil {
				return reg, nil, err
			}
		}
		if res.Owner != owner && res.Owner != nil {
			if err := s.checkOwner(res.Owner); err != nil {
				return reg, nil, err
			}
		}
	}

	if reg.Validate != nil {
		if err := reg.Validate(res); err != nil {
			return reg, nil, hookError(err)
		}
	}
	return reg, data, nil
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
