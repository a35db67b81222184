package server

import (
	"context"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
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
