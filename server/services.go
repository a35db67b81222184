package server

import (
	"context"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// What Loom's other services (the history service, server/history) share
// with the ResourceService they are served beside: its backend, its
// callers' ACLs, its checks of requests and its error codes, so that a
// request means and answers the same on both.

// Backend returns the storage backend the server serves.
func (s *Server) Backend() storage.Backend { return s.backend }

// Authorizer resolves the Authorizer of a request's caller, as every
// ResourceService request does (Config.ACLResolver); errors are statuses.
func (s *Server) Authorizer(ctx context.Context) (resource.Authorizer, error) {
	return s.authorizer(ctx)
}

// CheckID validates id, found at field in a request, as a ResourceService
// request naming one resource does, and returns the registration of its
// type and id with its tenancy normalized (a new ID when that changes it).
// Errors are InvalidArgument naming the field.
func (s *Server) CheckID(field string, id *pbresource.ID) (resource.Registered, *pbresource.ID, error) {
	return s.checkID(field, id)
}

// CheckListing validates the type and tenancy of a listing ("*" units
// allowed), as List does, and returns the type's registration and the
// tenancy normalized. Errors are InvalidArgument naming "type" or
// "tenancy".
func (s *Server) CheckListing(t *pbresource.Type, tenancy *pbresource.Tenancy) (resource.Registered, *pbresource.Tenancy, error) {
	reg, err := s.resolveType("type", t)
	if err != nil {
		return reg, nil, err
	}
	tenancy, err = resource.NormalizeTenancy("tenancy", reg.Scope, tenancy, true)
	if err != nil {
		return reg, nil, invalidArgument(err)
	}
	return reg, tenancy, nil
}

// ACLStatus maps the error of an ACL hook (resource.Registered's
// Authorize methods) to the status the ResourceService answers with:
// PermissionDenied for a refusal.
func ACLStatus(err error) error { return aclError(err) }

// IsDenied reports whether an ACL hook's error is a refusal, rather than
// the check itself failing.
func IsDenied(err error) bool { return isDenied(err) }

// StorageStatus maps a backend error to the status the ResourceService
// answers with (e.g. storage.ErrNotFound to NotFound).
func StorageStatus(err error) error { return storageError(err) }

// Fail logs a failed request of method as the ResourceService's are logged
// (at debug level, a fenced write as a warning), and returns err.
func (s *Server) Fail(method string, id *pbresource.ID, err error) error {
	return s.fail(method, id, err)
}

// CheckWrite runs the checks a Write makes of in before it reads the
// stored resource, as MutateAndValidate does: ID, tenancy, data, owner
// format, the limits on metadata and size (against nothing stored), the
// type's Mutate and Validate hooks, and the type's write ACL for authz. It
// returns the type's registration, the server's copy of in as the hooks
// left it (in is not changed; the copy shares what they did not change)
// and its decoded data. Errors are statuses naming the field.
func (s *Server) CheckWrite(authz resource.Authorizer, in *pbresource.Resource) (resource.Registered, *pbresource.Resource, proto.Message, error) {
	res := new(pbresource.Resource)
	reg, data, err := s.checkWrite(authz, in, res)
	return reg, res, data, err
}

// AuthorizeWriteAsStored checks, as a Write does, that authz may write
// stored, a resource stored under the name of a write of reg's type in
// another GroupVersion, as the type it is stored as.
func (s *Server) AuthorizeWriteAsStored(authz resource.Authorizer, reg resource.Registered, stored *pbresource.Resource) error {
	return s.authorizeWriteAsStored(authz, reg, stored)
}

// ReadStored reads the resource stored under id's name in whatever
// GroupVersion, and with whatever Uid, it is stored; nil, nil when there is
// none. Errors are the backend's.
func (s *Server) ReadStored(ctx context.Context, consistency storage.ReadConsistency, id *pbresource.ID) (*pbresource.Resource, error) {
	return s.readStored(ctx, consistency, &pbresource.ID{Type: id.Type, Tenancy: id.Tenancy, Name: id.Name})
}

// WriteContext returns ctx as a Write by authz's caller passes it to the
// backend: fenced as the request's metadata asks (resource.FenceMetadataKey)
// and naming the caller to the history (storage.Change). Errors are
// statuses.
func (s *Server) WriteContext(ctx context.Context, authz resource.Authorizer) (context.Context, error) {
	ctx, err := s.withFence(ctx, authz)
	if err != nil {
		return nil, err
	}
	return withChange(ctx, authz), nil
}

// SameData reports whether the Data fields a, decoded as aMsg, and b hold
// equal messages, as a Write decides it changes nothing.
func SameData(a *anypb.Any, aMsg proto.Message, b *anypb.Any) bool { return sameData(a, aMsg, b) }

// WriteStatusError maps the error of a backend write of res to the status
// a Write answers with (storage.ErrTooLarge as the size limit's error).
func WriteStatusError(res *pbresource.Resource, err error) error {
	return writeError(true, res, "", err)
}
