// Package catalog serves loom.catalog.v1.CatalogService
// (proto/pbcatalog/v1) beside a server.Server's ResourceService, over the
// same type registry, ACLs and backend: the registered types with what the
// caller may do with them, and counts of the stored resources.
//
// ListTypes asks each type's ACL hooks about a resource of the type with
// no name in the scope's default tenancy (see TypeInfo in catalog.proto for
// the caveat). GetStats reads the counts a storage.Counter keeps and leaves
// out the types and tenancies the caller may not list; a server whose
// backend is not a storage.Counter answers it with Unimplemented.
package catalog

import (
	"cmp"
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pbcatalogv1 "github.com/loomrt/loom/proto/pbcatalog/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// Service implements pbcatalogv1.CatalogServiceServer.
type Service struct {
	pbcatalogv1.UnimplementedCatalogServiceServer

	srv *server.Server
}

var _ pbcatalogv1.CatalogServiceServer = (*Service)(nil)

// New returns the catalog service of srv.
func New(srv *server.Server) *Service { return &Service{srv: srv} }

// Register adds the service to a gRPC server.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	pbcatalogv1.RegisterCatalogServiceServer(r, s)
}

// errNoCounts is the answer of a server whose backend keeps no counts.
var errNoCounts = status.Error(codes.Unimplemented,
	"this server's storage keeps no counts (its backend is not a storage.Counter)")

// ListTypes returns every registered type with the caller's access to it.
func (s *Service) ListTypes(ctx context.Context, _ *pbcatalogv1.ListTypesRequest) (*pbcatalogv1.ListTypesResponse, error) {
	const method = "ListTypes"
	authz, err := s.srv.Authorizer(ctx)
	if err != nil {
		return nil, s.srv.Fail(method, nil, err)
	}
	regs := s.srv.Registry().Types()
	out := &pbcatalogv1.ListTypesResponse{Types: make([]*pbcatalogv1.TypeInfo, 0, len(regs))}
	for _, reg := range regs {
		info, err := typeInfo(reg, authz)
		if err != nil {
			return nil, s.srv.Fail(method, &pbresource.ID{Type: reg.Type}, err)
		}
		out.Types = append(out.Types, info)
	}
	slices.SortFunc(out.Types, func(a, b *pbcatalogv1.TypeInfo) int {
		return cmp.Or(cmp.Compare(a.Type.Group, b.Type.Group), cmp.Compare(a.Type.Kind, b.Type.Kind),
			cmp.Compare(a.Type.GroupVersion, b.Type.GroupVersion))
	})
	return out, nil
}

// typeInfo describes reg with authz's access to it: the answers of its ACL
// hooks for a resource with no name in the scope's default tenancy. An
// error is a hook's that is not a refusal.
func typeInfo(reg resource.Registered, authz resource.Authorizer) (*pbcatalogv1.TypeInfo, error) {
	tenancy, err := resource.NormalizeTenancy("tenancy", reg.Scope, nil, false)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	id := &pbresource.ID{Type: reg.Type, Tenancy: tenancy}
	info := &pbcatalogv1.TypeInfo{Type: reg.Type, Scope: reg.Scope.String(), Message: string(reg.MessageName())}
	for _, c := range []struct {
		allowed *bool
		err     error
	}{
		{&info.Read, reg.AuthorizeRead(authz, id, nil)},
		{&info.List, reg.AuthorizeList(authz, tenancy)},
		{&info.Write, reg.AuthorizeWrite(authz, &pbresource.Resource{Id: id}, nil)},
	} {
		if c.err != nil && !server.IsDenied(c.err) {
			return nil, server.ACLStatus(c.err)
		}
		*c.allowed = c.err == nil
	}
	return info, nil
}

// GetStats returns the counts of the stored resources the caller may list.
func (s *Service) GetStats(ctx context.Context, req *pbcatalogv1.GetStatsRequest) (*pbcatalogv1.GetStatsResponse, error) {
	const method = "GetStats"
	counter, ok := s.srv.Backend().(storage.Counter)
	if !ok {
		return nil, s.srv.Fail(method, nil, errNoCounts)
	}
	authz, err := s.srv.Authorizer(ctx)
	if err != nil {
		return nil, s.srv.Fail(method, nil, err)
	}
	counts, err := counter.Stats(ctx)
	if err != nil {
		return nil, s.srv.Fail(method, nil, server.StorageStatus(err))
	}
	out := &pbcatalogv1.GetStatsResponse{}
	regs := s.registrations()
	var last *pbcatalogv1.TypeCount
	for _, c := range counts {
		if req.Type != nil && c.Type != storage.UnversionedTypeFrom(req.Type) {
			continue
		}
		allowed, err := mayList(regs, authz, c)
		if err != nil {
			return nil, s.srv.Fail(method, nil, err)
		}
		if !allowed {
			continue
		}
		if c.Type == storage.UnversionedTypeFrom(resource.TypeV1Tombstone) {
			out.Tombstones += c.Resources
		}
		if !req.ByTenancy && last != nil && last.Type.Group == c.Type.Group && last.Type.Kind == c.Type.Kind {
			last.Resources += c.Resources
			last.MarkedForDeletion += c.Marked
			continue
		}
		last = &pbcatalogv1.TypeCount{
			Type:              &pbresource.Type{Group: c.Type.Group, Kind: c.Type.Kind},
			Resources:         c.Resources,
			MarkedForDeletion: c.Marked,
		}
		if req.ByTenancy {
			last.Tenancy = &pbresource.Tenancy{Partition: c.Partition, Namespace: c.Namespace}
		}
		out.Counts = append(out.Counts, last)
	}
	return out, nil
}

// registrations returns the registered types by group and kind (one of
// their group versions: the ACL hooks of a type's versions are meant to
// agree).
func (s *Service) registrations() map[storage.UnversionedType]resource.Registered {
	regs := make(map[storage.UnversionedType]resource.Registered)
	for _, reg := range s.srv.Registry().Types() {
		k := storage.UnversionedTypeFrom(reg.Type)
		if _, ok := regs[k]; !ok {
			regs[k] = reg
		}
	}
	return regs
}

// mayList reports whether authz may list c's type in c's tenancy, as its
// List hook says; a type no longer registered gets the default check. An
// error is a hook's that is not a refusal.
func mayList(regs map[storage.UnversionedType]resource.Registered, authz resource.Authorizer, c storage.Count) (bool, error) {
	reg, ok := regs[c.Type]
	if !ok {
		reg = resource.Registered{Type: &pbresource.Type{Group: c.Type.Group, Kind: c.Type.Kind}}
	}
	err := reg.AuthorizeList(authz, &pbresource.Tenancy{Partition: c.Partition, Namespace: c.Namespace})
	if err != nil && !server.IsDenied(err) {
		return false, server.ACLStatus(err)
	}
	return err == nil, nil
}
