// Package server implements the ResourceService gRPC API over a
// storage.Backend and a resource.Registry. A host process creates one with
// New, registers it on its gRPC server with Register, and hands controllers
// running in the same process a client from NewInProcessClient.
//
// # What the service adds to the backend
//
// The backend only stores, compares versions and fans out watch events. The
// service validates every request against the type registry (names, types,
// tenancy for the type's scope, the Data message), runs the type's Mutate,
// Validate and ACL hooks, and turns the backend's compare-and-swap writes
// into the API's semantics: blanket writes are read-modify-write loops
// retried on conflict, Uid and statuses are carried over, no-op writes are
// detected and skipped, finalizers delay deletion, and deleting a resource
// that owns others leaves a Tombstone for the reaper.
//
// # Who may change a message
//
// The service follows the one rule in the resource package doc ("Who may
// change a message"). It never changes a request nor keeps any part of it
// (Write works on a shallow copy of the request's resource; the backend
// copies what it stores; WriteStatus hands a storage.StatusWriter its own
// stamped copy of the status).
// What its methods return, and every WatchList event, may be the backend's
// stored message, which nobody changes: gRPC marshals it, the in-process
// client (NewInProcessClient) hands the caller a copy of a response's
// resource (none if the caller passed resource.ResponseUnread) and the
// event itself on a watch. Over gRPC, the codec of ServerOptions marshals
// an event once for all the streams that send it.
//
// # Decisions where the design left a choice
//
//   - A Write that names a Uid when nothing is stored under the name is
//     NotFound: the Uid addresses a lifetime that does not exist (any more),
//     and the write must not recreate it. WriteStatus answers the same.
//   - Finalizers may be set when a resource is created; deletionTimestamp may
//     not, and no Write may add, change or drop it afterwards
//     (InvalidArgument naming metadata.deletionTimestamp).
//   - Once a resource is marked for deletion, a Write that changes anything
//     other than removing finalizers is InvalidArgument, as in Consul (the
//     message says the resource is marked for deletion and what may not
//     change). A Write that changes nothing is still accepted as a no-op. When the last finalizer goes, the
//     service deletes the resource and returns it as it was last written,
//     with the finalizers removed.
//   - An owner given on create must exist (InvalidArgument naming owner
//     otherwise); on update the owner must be given exactly as stored (its
//     Uid may be left out); leaving it out or changing it is InvalidArgument.
//   - A resource stored under another GroupVersion than a request names is
//     authorized as both types (authorize.go): Write, WriteStatus, Delete,
//     finalizer removal and MutateAndValidate need write access as each,
//     Read read access as each (before the mismatch is reported), and a
//     WatchList shows it only to a caller that may read and list it as
//     its own type. Write, WriteStatus and Delete authorize before telling
//     anything about what is stored (NotFound, Uid, version).
//   - Naming an owner on create needs read access to it: without it the
//     Write is PermissionDenied whether or not the owner exists, and a
//     wrong owner Uid is InvalidArgument without the stored one.
//     ListByOwner needs list access to the owner's type in its tenancy,
//     as on Consul.
//   - List returns only resources stored under the requested GroupVersion;
//     WatchList delivers every resource of the type's Group and Kind,
//     whatever GroupVersion it is stored under (consumers check the type).
//   - MutateAndValidate requires a valid name, like Write, so a request it
//     accepts passes Write's request checks too; it also runs the Write ACL
//     check.
//   - Deleting a resource that is already marked for deletion succeeds and
//     changes nothing. Marking changes metadata, so it gives the resource a
//     new Generation (and a watch event), which lets controllers notice.
//   - Finalizers are removed with ordinary Writes. A blanket Write replaces
//     the whole metadata, so two controllers removing their finalizers at
//     once should write with a Version and retry on Aborted; a blanket Write
//     built from an older read can look like it re-adds a finalizer, which
//     is InvalidArgument once the resource is marked for deletion.
//   - A Tombstone is stored by the backend in the same atomic step as its
//     owner's deletion, exactly when the owner owns something at that
//     moment (storage.WithTombstone), and the backend refuses to create a
//     resource whose owner is gone (storage.ErrOwnerNotFound, reported as
//     InvalidArgument naming owner). So a resource created while its owner
//     is being deleted is either refused or found by the reaper: there are
//     no orphans, even if the server stops between two steps. Tombstones are
//     named "tombstone-" plus the owner's lower-cased Uid and live in the
//     owner's tenancy ("default" for units its scope lacks); see
//     TombstoneID.
//   - WriteStatus requires every condition to have a Type, and a key of at
//     most 256 printable characters without spaces.
//   - Write, WriteStatus and Delete honour a fence given in the gRPC
//     metadata resource.FenceMetadataKey ("<revision>@<key>", see
//     storage.Fence): every backend write the request makes carries it, and
//     a backend that refuses it (the term has ended) makes the request fail
//     with FailedPrecondition ("write fenced: leadership has moved") at once,
//     without the retries of a blanket write. A malformed fence, or one
//     whose key the backend refuses as not one of its leader keys
//     (storage.FenceChecker), is InvalidArgument; a caller not allowed to
//     present fences (resource.CapabilityFence) is PermissionDenied. A request that needs no backend write (a no-op Write,
//     deleting what is gone) succeeds whatever its fence.
//   - A blanket Write that includes a status must include the stored one;
//     read-modify-write clients that race with status writers should leave
//     status empty (it is carried over) rather than send what they read.
//   - Every write is held to limits on what one resource may hold: its
//     size as stored (Config.MaxResourceBytes, 1 MiB by default), at most
//     MaxMetadataKeys metadata entries with keys of at most
//     MaxMetadataKeyLength and values of at most MaxMetadataValueLength
//     bytes, at most MaxFinalizers finalizers of at most
//     MaxFinalizerNameLength bytes each, and at most MaxStatusKeys status
//     keys. Breaking one is InvalidArgument naming the field: data,
//     metadata, metadata.finalizers, status (WriteStatus) or key. The size
//     counts room for the Version and the deletion mark the service adds
//     later, so whatever a Write accepted can be marked by Delete, and for
//     the longest finalizers the limits allow (about 32 KiB; at most an
//     eighth of the size limit), so that any controller, in process or
//     remote, can add its finalizer to it: the server does not know which
//     controllers manage a type. The finalizers and deletionTimestamp
//     entries do not count towards MaxMetadataKeys, for the same reason. What is
//     stored already is never refused again: a resource stored before a
//     limit was lowered may still be written as long as the write does not
//     make it bigger, nor add finalizers, metadata entries or status keys
//     beyond the limits, so it can be trimmed and deleted. A backend that
//     refuses a resource as too large (storage.ErrTooLarge, e.g. etcd past
//     its --max-request-bytes) gives the same InvalidArgument.
//   - The size limit keeps every resource within one gRPC message (a Read
//     response, a watch event). A List or ListByOwner response is bounded
//     by Config.MaxListBytes (32 MiB by default): an unpaged one that
//     would be bigger is ResourceExhausted, telling the client to page
//     (page_size), and a page ends early with a next_page_token.
//     ResourceExhausted, as gRPC itself answers a message over a
//     client's limit: what is exhausted is the answer's size, and the same
//     request will fail again while the type is that big, which Unavailable
//     or Aborted would invite clients to retry. At most
//     Config.MaxLargeLists Lists with answers over LargeListBytes are
//     built at once; another waits up to LargeListWait, then is
//     ResourceExhausted too (retry later, or page). The bounds hold while
//     a response is built; gRPC marshals it after the handler returns, so
//     a response being marshalled no longer holds its slot.
//   - Work on finalizers takes time linear in their number: the service
//     compares finalizer lists through a set once they are long.
//   - Clients cannot Write (nor MutateAndValidate) Tombstones
//     (resource.TypeV1Tombstone): InvalidArgument naming id.type. The
//     service writes them itself, straight to the backend; the reaper only
//     reads, lists, watches and deletes them, which stays allowed. Refusing
//     is simpler and safer than verifying: a forged tombstone naming a live
//     owner would otherwise wait, and be re-checked, for as long as the
//     owner lives, and a reaper that verified tombstones against their
//     owners would still be acting on what any client may write. Consul's
//     service does not refuse them (its Delete carries a note that it
//     probably should); Loom does.
//   - The type URL of a resource's Data is stored in its canonical form,
//     "type.googleapis.com/" and the message's full name. An Any naming
//     the registered message in another form (a bare full name, another
//     host) is rewritten to it rather than refused: Any allows such forms
//     and some clients send them, and one stored form keeps no-op
//     detection and consumers' type checks simple.
//   - Error messages repeat at most resource.MaxQuoted (64) bytes of any
//     input they quote, followed by its length ("…(N bytes)"; see
//     resource.Quote), so a request with a huge name, type, key or version
//     gets a short error that still names the field.
package server

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// Config is what New needs.
type Config struct {
	// Backend stores the resources. Required.
	Backend storage.Backend

	// Registry holds the resource types the service accepts. When nil, New
	// creates an empty one (holding only the Tombstone type).
	Registry resource.Registry

	// Logger receives debug logs of failed requests, and a warning for each
	// write refused by a fence. Nil discards them.
	Logger hclog.Logger

	// ACLResolver returns the Authorizer for the caller of one request, e.g.
	// from a token in the incoming gRPC metadata. An error that is a gRPC
	// status is returned to the caller as is; resource.ErrPermissionDenied
	// becomes PermissionDenied; anything else is Internal. Nil allows
	// everything (resource.AllowAll). It is asked about in-process calls
	// too; wrap it in TrustInProcess to let the host's own controllers
	// through (acl.Source.Resolve is such a resolver for an ACL file).
	ACLResolver func(ctx context.Context) (resource.Authorizer, error)

	// MaxResourceBytes is the largest a stored resource may be, in bytes of
	// its protobuf encoding (with room for the version and deletion mark
	// the service adds later, and for finalizers, see the package
	// documentation). A Write, WriteStatus or Delete that would
	// store a bigger one fails with InvalidArgument naming the field that
	// made it so big. Zero means DefaultMaxResourceBytes (1 MiB); keep it
	// well under the gRPC message limit of the server's clients (4 MiB by
	// default) and, on etcd, under etcd's --max-request-bytes (1.5 MiB by
	// default). New panics if it is negative.
	MaxResourceBytes int

	// MaxListBytes bounds the encoded size of a List or ListByOwner
	// response. A request without page_size or page_token whose answer
	// would be bigger fails with ResourceExhausted, telling the client to
	// page; a page ends early (with a next_page_token) instead. Zero means
	// DefaultMaxListBytes (32 MiB). New panics if it is negative.
	MaxListBytes int

	// MaxLargeLists is how many Lists and ListByOwners whose responses are
	// over LargeListBytes (4 MiB) the server builds at once; one more
	// waits up to LargeListWait for a slot, then fails with
	// ResourceExhausted. Zero means DefaultMaxLargeLists (4). New panics if
	// it is negative.
	MaxLargeLists int

	// WatchBookmarkInterval is how long a WatchList stream that asked for
	// bookmarks stays idle before it is sent one. Zero means
	// DefaultWatchBookmarkInterval. New panics if it is negative.
	WatchBookmarkInterval time.Duration
}

// DefaultWatchBookmarkInterval is the idle time after which a WatchList
// stream that asked for bookmarks gets one, unless
// Config.WatchBookmarkInterval says otherwise: a minute, as in Kubernetes.
const DefaultWatchBookmarkInterval = time.Minute

// Server implements pbresource.ResourceServiceServer.
type Server struct {
	pbresource.UnimplementedResourceServiceServer

	backend  storage.Backend
	registry resource.Registry
	logger   hclog.Logger
	resolve  func(ctx context.Context) (resource.Authorizer, error)
	encoded  *encodedEvents // see watch_encode.go
	bookmark time.Duration  // see Config.WatchBookmarkInterval
	limits   limits         // see limits.go
	// largeLists holds a token per large List being built (listBudget).
	largeLists chan struct{}

	watchACLs watchACLs // see watch_acl.go

	// shuttingDown ends when Shutdown is called; every WatchList's
	// context ends with it.
	shuttingDown context.Context
	shutdown     context.CancelFunc
}

var _ pbresource.ResourceServiceServer = (*Server)(nil)

// New returns a Server for cfg. It registers the Tombstone type
// (resource.TypeV1Tombstone, namespace-scoped) in the registry unless it is
// already there. It panics if cfg.Backend is nil or a limit is negative.
//
// The Server alone does no cascading deletion: deleting an owner stores a
// tombstone, and the reaper controller deletes what it owned. Embedders make
// the server with builtin.New (package server/builtin), which returns it
// with a Manager that runs the reaper.
func New(cfg Config) *Server {
	if cfg.Backend == nil {
		panic("server.New: Config.Backend is required")
	}
	if cfg.MaxResourceBytes < 0 {
		panic("server.New: Config.MaxResourceBytes must not be negative")
	}
	if cfg.MaxListBytes < 0 || cfg.MaxLargeLists < 0 {
		panic("server.New: Config.MaxListBytes and Config.MaxLargeLists must not be negative")
	}
	if cfg.MaxLargeLists == 0 {
		cfg.MaxLargeLists = DefaultMaxLargeLists
	}
	if cfg.WatchBookmarkInterval < 0 {
		panic("server.New: Config.WatchBookmarkInterval must not be negative")
	}
	if cfg.WatchBookmarkInterval == 0 {
		cfg.WatchBookmarkInterval = DefaultWatchBookmarkInterval
	}
	s := &Server{
		backend:  cfg.Backend,
		registry: cfg.Registry,
		logger:   cfg.Logger,
		resolve:  cfg.ACLResolver,
		encoded:  newEncodedEvents(),
		limits:   newLimits(cfg.MaxResourceBytes, cfg.MaxListBytes),
		bookmark: cfg.WatchBookmarkInterval,

		largeLists: make(chan struct{}, cfg.MaxLargeLists),
	}
	s.shuttingDown, s.shutdown = context.WithCancel(context.Background())
	if s.registry == nil {
		s.registry = resource.NewRegistry()
	}
	if s.logger == nil {
		s.logger = hclog.NewNullLogger()
	}
	if _, ok := s.registry.Resolve(resource.TypeV1Tombstone); !ok {
		resource.MustRegister(s.registry, resource.Registration[*pbresource.Tombstone]{
			Type:  resource.TypeV1Tombstone,
			Scope: resource.ScopeNamespace,
		})
	}
	return s
}

// Register adds the ResourceService to a gRPC server.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	pbresource.RegisterResourceServiceServer(r, s)
}

// ErrShuttingDown is how WatchList streams end once Shutdown has been
// called: Unavailable, which tells a client to watch again, on another
// server or once this one is back.
var ErrShuttingDown = status.Error(codes.Unavailable, "server is shutting down")

// Shutdown ends every open WatchList stream with ErrShuttingDown, and makes
// later WatchList calls fail with it at once. A host calls it when it starts
// to shut down, before it stops its gRPC server gracefully: a watch only
// ends when its client or the server ends it, so otherwise a graceful stop
// waits for every watch. A stream ends at its next event even when events
// are queued for it. Unary RPCs are not affected. Shutdown does not wait for
// the streams to end; it may be called more than once, from any goroutine.
//
// A stream whose client has stopped reading cannot deliver its final
// status (gRPC flow control holds it behind the unread events), and its
// handler may be blocked sending until the connection closes; a host
// should therefore not wait for such connections to drain for long (see
// grpc.Server.Stop).
func (s *Server) Shutdown() { s.shutdown() }

// Registry returns the type registry the server validates against.
func (s *Server) Registry() resource.Registry { return s.registry }

// authorizer resolves the caller's Authorizer.
func (s *Server) authorizer(ctx context.Context) (resource.Authorizer, error) {
	if s.resolve == nil {
		return resource.AllowAll, nil
	}
	authz, err := s.resolve(ctx)
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		if errors.Is(err, resource.ErrPermissionDenied) {
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
		return nil, status.Errorf(codes.Internal, "resolving the caller's ACLs: %v", err)
	}
	if authz == nil {
		return resource.AllowAll, nil
	}
	return authz, nil
}

// readConsistency returns the consistency the caller asked for in its
// incoming metadata.
func readConsistency(ctx context.Context) storage.ReadConsistency {
	for _, v := range metadata.ValueFromIncomingContext(ctx, resource.ConsistencyModeKey) {
		if strings.EqualFold(v, resource.ConsistencyModeConsistent) {
			return storage.StrongConsistency
		}
	}
	return storage.EventualConsistency
}

// aclError turns an ACL hook's error into a status: permission errors become
// PermissionDenied, status errors keep their code, anything else is Internal.
func aclError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, resource.ErrPermissionDenied) {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Internal, "ACL check failed: %v", err)
}

// isDenied reports whether an ACL hook's error means "not allowed" (as
// opposed to the check itself failing).
func isDenied(err error) bool {
	if errors.Is(err, resource.ErrPermissionDenied) {
		return true
	}
	return status.Code(err) == codes.PermissionDenied
}

// storageError maps a backend error to a status.
func storageError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, storage.ErrOutcomeUnknown):
		// Before the context's errors: a caller whose deadline passed
		// must still learn that the write may have landed.
		return status.Errorf(codes.Unavailable, "%v; read the resource and compare its version to learn whether it was", err)
	case errors.Is(err, storage.ErrInconsistent):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, storage.ErrCASFailure):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, storage.ErrWrongUid):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, storage.ErrFenced):
		return fencedError{status.Newf(codes.FailedPrecondition, "%s; nothing was written (%v)", fencedMessage, err)}
	case errors.Is(err, storage.ErrInvalidFence):
		return status.Errorf(codes.InvalidArgument, "metadata %s: %v", resource.FenceMetadataKey, err)
	case errors.Is(err, storage.ErrOwnerNotFound):
		return invalidField("owner", "%v", err)
	case errors.Is(err, storage.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, storage.ErrTooLarge):
		return status.Errorf(codes.InvalidArgument, "resource: too large to store (%v); see server.Config.MaxResourceBytes", err)
	case errors.Is(err, storage.ErrInvalidVersion):
		return invalidField("since_version", "%v", err)
	case errors.Is(err, storage.ErrFutureVersion):
		return status.Errorf(codes.OutOfRange, "since_version: %v; this store never issued it (did the server restart?): watch without since_version", err)
	case errors.Is(err, storage.ErrWatchTooSlow):
		return status.Error(codes.Aborted, "the watch could not keep up with the rate of changes and was ended; start a new WatchList")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Errorf(codes.Internal, "storage: %v", err)
}

// fail logs a failed request at debug level and returns err unchanged.
func (s *Server) fail(method string, id *pbresource.ID, err error) error {
	if errors.As(err, new(fencedError)) {
		// A deposed leader's late write: worth an operator's notice, and
		// the proof that the fence did its job.
		s.logger.Warn("write refused by the fence: its leadership term has ended", "method", method, "id", resource.Truncate(resource.IDString(id)))
		return err
	}
	if s.logger.IsDebug() {
		// The ID may be the invalid one a request gave: keep the log short.
		s.logger.Debug("request failed", "method", method, "id", resource.Truncate(resource.IDString(id)), "error", err)
	}
	return err
}
