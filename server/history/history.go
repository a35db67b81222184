// Package history serves loom.history.v1.HistoryService (proto/pbhistory/v1)
// beside a server.Server's ResourceService, over the same backend, ACLs and
// type registry: the past versions of resources and the trash of deleted
// ones, which a storage.Historian keeps, and their restoration.
//
// Reading a revision, or listing revisions, needs read access to the
// resource (the type's AuthorizeRead hook, as ResourceService.Read);
// listing the trash needs list access to the type in the tenancy, and
// leaves out the deleted resources the caller may not read, as List does.
// A restore reads the revision (read access) and writes through the
// ResourceService's own Write path (server.Server.Write and Create): write
// access, the Mutate and Validate hooks, the limits, fences and the
// author recorded in history are those of any Write.
//
// A server whose backend is not a storage.Historian answers every call
// with Unimplemented.
package history

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// Service implements pbhistoryv1.HistoryServiceServer.
type Service struct {
	pbhistoryv1.UnimplementedHistoryServiceServer

	srv *server.Server
}

var _ pbhistoryv1.HistoryServiceServer = (*Service)(nil)

// New returns the history service of srv.
func New(srv *server.Server) *Service { return &Service{srv: srv} }

// Register adds the service to a gRPC server.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	pbhistoryv1.RegisterHistoryServiceServer(r, s)
}

// errNoHistory is the answer of a server whose backend keeps no history.
var errNoHistory = status.Error(codes.Unimplemented,
	"this server's storage keeps no history (its backend is not a storage.Historian)")

// call is what every request starts with: the backend as a Historian and
// the caller's Authorizer.
func (s *Service) call(ctx context.Context) (storage.Historian, resource.Authorizer, error) {
	h, ok := s.srv.Backend().(storage.Historian)
	if !ok {
		return nil, nil, errNoHistory
	}
	authz, err := s.srv.Authorizer(ctx)
	return h, authz, err
}

// request is what a request about one resource starts with: call's, then
// the registration of the resource's type and its ID checked. Errors are
// logged and returned as the request's.
type request struct {
	h     storage.Historian
	authz resource.Authorizer
	reg   resource.Registered
	id    *pbresource.ID
}

func (s *Service) begin(ctx context.Context, method string, id *pbresource.ID) (request, error) {
	var r request
	var err error
	if r.h, r.authz, err = s.call(ctx); err != nil {
		return r, s.srv.Fail(method, id, err)
	}
	if r.reg, r.id, err = s.srv.CheckID("id", id); err != nil {
		return r, s.srv.Fail(method, id, err)
	}
	return r, nil
}

// ReadRevision returns one recorded version of a resource.
func (s *Service) ReadRevision(ctx context.Context, req *pbhistoryv1.ReadRevisionRequest) (*pbhistoryv1.ReadRevisionResponse, error) {
	const method = "ReadRevision"
	r, err := s.begin(ctx, method, req.GetId())
	if err != nil {
		return nil, err
	}
	h, authz, reg, id := r.h, r.authz, r.reg, r.id
	if req.Version == "" {
		return nil, s.srv.Fail(method, id, missing("version"))
	}
	if err := checkVersion("version", req.Version); err != nil {
		return nil, s.srv.Fail(method, id, err)
	}
	rev, err := s.readRevision(ctx, h, authz, reg, id, req.Version)
	if err != nil {
		return nil, s.srv.Fail(method, id, err)
	}
	return &pbhistoryv1.ReadRevisionResponse{Revision: revisionProto(rev)}, nil
}

// readRevision reads the revision of id at version, which the caller must
// be allowed to read. A caller who may not read id learns nothing else.
func (s *Service) readRevision(ctx context.Context, h storage.Historian, authz resource.Authorizer, reg resource.Registered, id *pbresource.ID, version string) (storage.Revision, error) {
	if err := server.ACLStatus(reg.AuthorizeRead(authz, id, nil)); err != nil {
		return storage.Revision{}, err
	}
	rev, err := h.ReadRevision(ctx, id, version)
	if errors.Is(err, storage.ErrNotFound) {
		return rev, status.Errorf(codes.NotFound, "no revision of %s at version %s is kept; list its revisions",
			resource.IDString(id), resource.Quote(version))
	}
	if err != nil {
		return rev, server.StorageStatus(err)
	}
	return rev, server.ACLStatus(s.authorizeRevision(authz, reg, rev))
}

// authorizeRevision checks read access to rev's resource as the type it
// was stored as (reg, the requested type's registration, when that is not
// registered any more). It returns the hook's error as it is.
func (s *Service) authorizeRevision(authz resource.Authorizer, reg resource.Registered, rev storage.Revision) error {
	res := rev.Resource
	if r, ok := s.srv.Registry().Resolve(res.Id.Type); ok {
		reg = r
	}
	return reg.AuthorizeRead(authz, res.Id, res)
}

// ListRevisions returns the recorded versions of a name, newest first.
func (s *Service) ListRevisions(ctx context.Context, req *pbhistoryv1.ListRevisionsRequest) (*pbhistoryv1.ListRevisionsResponse, error) {
	const method = "ListRevisions"
	r, err := s.begin(ctx, method, req.GetId())
	if err != nil {
		return nil, err
	}
	h, authz, reg, id := r.h, r.authz, r.reg, r.id
	if err := server.ACLStatus(reg.AuthorizeRead(authz, id, nil)); err != nil {
		return nil, s.srv.Fail(method, id, err)
	}
	revs, next, err := s.page(req.PageSize, req.PageToken, authz, reg, func(preq storage.RevisionPageRequest) (storage.RevisionPage, error) {
		return h.ListRevisions(ctx, id, preq)
	})
	if err != nil {
		return nil, s.srv.Fail(method, id, err)
	}
	return &pbhistoryv1.ListRevisionsResponse{Revisions: revs, NextPageToken: next}, nil
}

// ListTrash returns the deleted resources of a type in a tenancy, newest
// deletion first.
func (s *Service) ListTrash(ctx context.Context, req *pbhistoryv1.ListTrashRequest) (*pbhistoryv1.ListTrashResponse, error) {
	const method = "ListTrash"
	h, authz, err := s.call(ctx)
	if err != nil {
		return nil, s.srv.Fail(method, nil, err)
	}
	reg, tenancy, err := s.srv.CheckListing(req.GetType(), req.GetTenancy())
	if err != nil {
		return nil, s.srv.Fail(method, nil, err)
	}
	if err := server.ACLStatus(reg.AuthorizeList(authz, tenancy)); err != nil {
		return nil, s.srv.Fail(method, nil, err)
	}
	typ := storage.UnversionedTypeFrom(req.Type)
	revs, next, err := s.page(req.PageSize, req.PageToken, authz, reg, func(preq storage.RevisionPageRequest) (storage.RevisionPage, error) {
		return h.ListTrash(ctx, typ, tenancy, req.NamePrefix, preq)
	})
	if err != nil {
		return nil, s.srv.Fail(method, nil, err)
	}
	return &pbhistoryv1.ListTrashResponse{Revisions: revs, NextPageToken: next}, nil
}

// revisionProto is rev on the wire. The resource is shared, as the
// ResourceService's responses share the backend's messages.
func revisionProto(rev storage.Revision) *pbhistoryv1.Revision {
	return &pbhistoryv1.Revision{
		Resource:    rev.Resource,
		Version:     rev.Version,
		Time:        timestamppb.New(rev.Time),
		By:          rev.By,
		CascadeFrom: rev.CascadeFrom,
		Deleted:     rev.Deleted,
		Created:     rev.Created,
	}
}

// checkVersion checks that v, found at field, is a store version: a
// decimal number.
func checkVersion(field, v string) error {
	if _, err := strconv.ParseUint(v, 10, 64); err != nil {
		return status.Errorf(codes.InvalidArgument, "%s: %s is not a store version (a decimal number)", field, resource.Quote(v))
	}
	return nil
}

func missing(field string) error {
	return status.Error(codes.InvalidArgument, resource.ErrInvalidField{Name: field, Wrapped: resource.ErrMissing}.Error())
}
