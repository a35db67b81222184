package bulk

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// Export's chunks: DefaultChunkSize resources unless the request asks for
// another number, at most MaxChunkSize, and never more than ChunkBytes
// bytes but for a single resource larger than that.
const (
	DefaultChunkSize = 500
	MaxChunkSize     = 5000
	ChunkBytes       = 1 << 20
)

// exportPage is how many resources Export reads from the backend at once.
const exportPage = 1000

// Export implements pbbulkv1.BulkServiceServer.
func (s *Service) Export(req *pbbulkv1.ExportRequest, stream grpc.ServerStreamingServer[pbbulkv1.ExportResponse]) error {
	const method = "Export"
	ctx := stream.Context()
	authz, err := s.srv.Authorizer(ctx)
	if err != nil {
		return s.srv.Fail(method, nil, err)
	}
	listings, err := s.exportTypes(req)
	if err != nil {
		return s.srv.Fail(method, nil, err)
	}
	ex := &exporter{s: s, authz: authz, stream: stream, withStatus: req.WithStatus, chunkSize: chunkSize(req.ChunkSize)}
	for _, l := range listings {
		if err := ex.exportType(ctx, l.reg, l.tenancy); err != nil {
			return s.srv.Fail(method, nil, err)
		}
	}
	if err := ex.flush(true); err != nil {
		return s.srv.Fail(method, nil, err)
	}
	return nil
}

func chunkSize(n uint32) int {
	switch {
	case n == 0:
		return DefaultChunkSize
	case n > MaxChunkSize:
		return MaxChunkSize
	}
	return int(n)
}

// listing is one type of an export and the tenancy it is listed in.
type listing struct {
	reg     resource.Registered
	tenancy *pbresource.Tenancy
}

// exportTypes returns the listings of the types req names (every
// registered type but Tombstones when it names none), one per Group and
// Kind, in req's tenancy with empty units made wildcards, normalized for
// each type's scope.
func (s *Service) exportTypes(req *pbbulkv1.ExportRequest) ([]listing, error) {
	t := req.GetTenancy()
	tenancy := &pbresource.Tenancy{Partition: t.GetPartition(), Namespace: t.GetNamespace()}
	if tenancy.Partition == "" {
		tenancy.Partition = resource.Wildcard
	}
	if tenancy.Namespace == "" {
		tenancy.Namespace = resource.Wildcard
	}
	types := req.Types
	if len(types) == 0 {
		for _, reg := range s.srv.Registry().Types() {
			if !resource.EqualUnversionedType(reg.Type, resource.TypeV1Tombstone) {
				types = append(types, reg.Type)
			}
		}
	}
	seen := map[[2]string]bool{}
	var out []listing
	for _, typ := range types {
		k := [2]string{typ.GetGroup(), typ.GetKind()}
		if seen[k] {
			continue
		}
		seen[k] = true
		reg, t, err := s.srv.CheckListing(typ, tenancy)
		if err != nil {
			return nil, err
		}
		out = append(out, listing{reg: reg, tenancy: t})
	}
	return out, nil
}

// exporter is one Export under way.
type exporter struct {
	s          *Service
	authz      resource.Authorizer
	stream     grpc.ServerStreamingServer[pbbulkv1.ExportResponse]
	withStatus bool
	chunkSize  int
	version    string // what every page is listed at, from the first
	chunk      []*pbresource.Resource
	chunkBytes int
}

// exportType sends the resources of reg's type in tenancy the caller may
// read.
func (ex *exporter) exportType(ctx context.Context, reg resource.Registered, tenancy *pbresource.Tenancy) error {
	if err := aclStatus(reg.AuthorizeList(ex.authz, tenancy)); err != nil {
		return err
	}
	typ := storage.UnversionedTypeFrom(reg.Type)
	pl, ok := ex.s.srv.Backend().(storage.PagedLister)
	if !ok {
		return status.Error(codes.Unimplemented, "this server's storage cannot list at one version (its backend is not a storage.PagedLister), so it cannot export")
	}
	preq := storage.PageRequest{Version: ex.version, Limit: exportPage}
	for {
		page, err := pl.ListPage(ctx, typ, tenancy, "", preq)
		if errors.Is(err, storage.ErrVersionGone) {
			return status.Errorf(codes.Aborted, "the store no longer has version %s, which the export began at: it changed too much while the export ran; run it again", ex.version)
		}
		if err != nil {
			return storageStatus(err)
		}
		ex.version, preq.Version = page.Version, page.Version
		for _, res := range page.Resources {
			if err := ex.add(reg, res); err != nil {
				return err
			}
		}
		if !page.More {
			return nil
		}
		last := page.Last
		preq.After = &last
	}
}

// add adds res to the chunk when the caller may read it, and sends the
// chunk when it is full.
func (ex *exporter) add(reg resource.Registered, res *pbresource.Resource) error {
	if r, ok := ex.s.srv.Registry().Resolve(res.Id.Type); ok {
		reg = r
	}
	if err := reg.AuthorizeRead(ex.authz, res.Id, res); err != nil {
		if server.IsDenied(err) {
			return nil // left out, as List leaves it out
		}
		return aclStatus(err)
	}
	if !ex.withStatus && len(res.Status) > 0 {
		// The stored resource is shared: a new one without its status.
		res = &pbresource.Resource{Id: res.Id, Owner: res.Owner, Version: res.Version, Generation: res.Generation, Metadata: res.Metadata, Data: res.Data}
	}
	n := proto.Size(res)
	if len(ex.chunk) > 0 && ex.chunkBytes+n > ChunkBytes {
		if err := ex.flush(false); err != nil {
			return err
		}
	}
	ex.chunk = append(ex.chunk, res)
	ex.chunkBytes += n
	if len(ex.chunk) >= ex.chunkSize {
		return ex.flush(false)
	}
	return nil
}

// flush sends the chunk; the last flush sends one, empty or not, so the
// client learns the version of an empty export.
func (ex *exporter) flush(last bool) error {
	if len(ex.chunk) == 0 && !last {
		return nil
	}
	err := ex.stream.Send(&pbbulkv1.ExportResponse{Resources: ex.chunk, Version: ex.version})
	ex.chunk, ex.chunkBytes = nil, 0
	return err
}
