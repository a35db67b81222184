// Package bulk serves loom.bulk.v1.BulkService (proto/pbbulk/v1) beside a
// server.Server's ResourceService, over the same backend, ACLs and type
// registry: Import writes a stream of resources, all of them checked before
// any is written, and Export streams every resource of some types at one
// store version.
//
// # Import
//
// Import reads the whole stream first (at most Limits.MaxItems resources
// and Limits.MaxBytes bytes; more is ResourceExhausted), then checks every
// resource: the checks of a Write that need no storage (server.CheckWrite:
// ID, data, sizes, the Mutate and Validate hooks, the write ACL), no two
// resources of one name, and against what is stored: the Uid and Version
// given, the owner (in the stream or stored, with the Uid given), an owner
// that may not change. When any resource is rejected, nothing is written,
// and the response counts the rejections and gives the reasons of the
// first Limits.MaxRejections of them.
//
// Then it writes them, owners before what they own, Limits.Writers at a
// time. A resource whose data, metadata and owner equal the stored ones is
// not written ("unchanged"), so a second run of the same import changes
// nothing. Without preserve each write is a ResourceService Write, as
// `loom apply` makes it: statuses given are ignored, the stored finalizers
// and deletion mark are kept unless the resource's metadata has the key,
// and the write is conditional on the version compared with. With
// preserve (the "restore" ACL capability) each resource is created as
// given, Uid, generation, owner Uid, metadata and statuses included, under
// a name not taken; a resource stored with the same Uid and content is
// unchanged, anything else under its name is a rejection.
//
// Import is atomic on a bad resource, not on a failing store: a write that
// fails midway (the store unavailable, a concurrent writer) stops the
// import with that error, and what was written stays. The import is
// idempotent, so running it again completes it.
//
// # Export
//
// Export lists each type in pages at one store version, the first page's,
// which every other type is listed at too: the export is a consistent
// snapshot of all its types. When the store no longer has that version
// (the export took longer than the store keeps its past), it ends with
// Aborted, and is run again. Resources the caller may not read are left
// out, as List leaves them out.
package bulk

import (
	"google.golang.org/grpc"

	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	"github.com/loomrt/loom/server"
)

// Limits bound what one Import holds and does.
type Limits struct {
	// MaxItems is the most resources one Import may send.
	MaxItems int
	// MaxBytes is the most bytes (of encoded ImportRequests) one Import
	// may send: the server holds them all until it writes.
	MaxBytes int
	// MaxRejections is the most rejection reasons an ImportResponse gives;
	// it counts the others.
	MaxRejections int
	// Workers is how many resources an Import checks, or writes, at once.
	Workers int
}

// DefaultLimits are the limits of a host.
var DefaultLimits = Limits{
	MaxItems:      500_000,
	MaxBytes:      256 << 20,
	MaxRejections: 100,
	Workers:       64,
}

// Service implements pbbulkv1.BulkServiceServer.
type Service struct {
	pbbulkv1.UnimplementedBulkServiceServer

	srv    *server.Server
	limits Limits
	// slot is held by the one Import that reads, checks and writes at a
	// time; the others wait (their streams unread), so the server holds
	// at most one import's resources.
	slot chan struct{}
}

var _ pbbulkv1.BulkServiceServer = (*Service)(nil)

// New returns the bulk service of srv, with lim (DefaultLimits for zero
// fields).
func New(srv *server.Server, lim Limits) *Service {
	d := DefaultLimits
	if lim.MaxItems <= 0 {
		lim.MaxItems = d.MaxItems
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = d.MaxBytes
	}
	if lim.MaxRejections <= 0 {
		lim.MaxRejections = d.MaxRejections
	}
	if lim.Workers <= 0 {
		lim.Workers = d.Workers
	}
	return &Service{srv: srv, limits: lim, slot: make(chan struct{}, 1)}
}

// Register adds the service to a gRPC server.
func (s *Service) Register(r grpc.ServiceRegistrar) {
	pbbulkv1.RegisterBulkServiceServer(r, s)
}
