package server

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// A request names a type with its GroupVersion, and the resource stored
// under the name may be stored under another (see "Decisions" in the
// package doc). Access to such a resource is authorized as both: as the
// type the request names and as the type it is stored as, so that a token
// allowed only foo.v2.Bar can neither overwrite, delete, mark nor read a
// stored foo.v1.Bar through foo.v2.Bar. When the two are the same
// GroupVersion, one check is made, with nothing allocated.

// authorizeWriteStored authorizes changing stored, what is stored under the
// name of id (normalized), through a request naming id's type: WriteStatus,
// Delete. The requested type's hook gets stored itself when stored is of
// that type, and else a resource holding only id (nothing of its type is
// stored), as for a Delete of what does not exist.
func (s *Server) authorizeWriteStored(authz resource.Authorizer, reg resource.Registered, id *pbresource.ID, stored *pbresource.Resource) error {
	if sameGroupVersion(id, stored) {
		return aclError(reg.AuthorizeWrite(authz, stored, nil))
	}
	if err := aclError(reg.AuthorizeWrite(authz, &pbresource.Resource{Id: id}, nil)); err != nil {
		return err
	}
	return s.authorizeWriteAsStored(authz, reg, stored)
}

// authorizeWriteAsStored authorizes changing stored as the type it is
// stored as; reg is the requested type's registration (see
// registrationOf).
func (s *Server) authorizeWriteAsStored(authz resource.Authorizer, reg resource.Registered, stored *pbresource.Resource) error {
	return aclError(s.registrationOf(reg, stored).AuthorizeWrite(authz, stored, nil))
}

// authorizeReadStored authorizes reading stored, which is stored under the
// name of id (normalized) but under another GroupVersion: as id's type,
// with nothing of that type stored, and as the type it is stored as.
func (s *Server) authorizeReadStored(authz resource.Authorizer, reg resource.Registered, id *pbresource.ID, stored *pbresource.Resource) error {
	if err := aclError(reg.AuthorizeRead(authz, id, nil)); err != nil {
		return err
	}
	return aclError(s.registrationOf(reg, stored).AuthorizeRead(authz, stored.Id, stored))
}

// sameGroupVersion reports whether res is stored under the GroupVersion id
// names.
func sameGroupVersion(id *pbresource.ID, res *pbresource.Resource) bool {
	return res.GetId().GetType().GetGroupVersion() == id.GetType().GetGroupVersion()
}

// authorizeOwner authorizes naming the owner name (an ID without Uid) on a
// Write, with stored what is stored under its name (nil: nothing): it needs
// read access, as a Read of name would. Being refused is PermissionDenied
// naming the owner field, whatever is stored, so a caller who may not read
// the owner cannot tell whether it exists.
func (s *Server) authorizeOwner(authz resource.Authorizer, name *pbresource.ID, stored *pbresource.Resource) error {
	reg, _ := s.registry.Resolve(name.Type) // checked by prepare; else the default check
	var err error
	switch {
	case stored == nil:
		err = aclError(reg.AuthorizeRead(authz, name, nil))
	case sameGroupVersion(name, stored):
		err = aclError(reg.AuthorizeRead(authz, name, stored))
	default:
		err = s.authorizeReadStored(authz, reg, name, stored)
	}
	if err != nil && status.Code(err) == codes.PermissionDenied {
		return status.Error(codes.PermissionDenied, "owner: "+status.Convert(err).Message())
	}
	return err
}

// authorizeWatched authorizes sending res on a WatchList of reg's type in
// tenancy: read access to it as the type it is stored as and, when that is
// another GroupVersion than the watch's, list access to that type in
// tenancy too (the watch's own type was authorized when it began). It
// returns the hooks' errors as they are.
func (s *Server) authorizeWatched(authz resource.Authorizer, reg resource.Registered, tenancy *pbresource.Tenancy, res *pbresource.Resource) error {
	t := res.GetId().GetType()
	if t.GetGroupVersion() == reg.Type.GetGroupVersion() {
		return reg.AuthorizeRead(authz, res.Id, res)
	}
	stored, ok := s.registry.Resolve(t)
	if !ok {
		stored = resource.Registered{Type: t} // no longer registered: the default checks
	}
	if err := stored.AuthorizeRead(authz, res.Id, res); err != nil {
		return err
	}
	return stored.AuthorizeList(authz, tenancy)
}
