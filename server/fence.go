package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// withFence returns ctx carrying the storage.Fence the caller asked for with
// the resource.FenceMetadataKey metadata, if it did. Write, WriteStatus and
// Delete pass the result to the backend, so every backend write they make
// for the request (a tombstone and the delete that follows it included) is
// fenced; a backend that cannot fence ignores it. A malformed value is
// InvalidArgument: silently writing unfenced would void the caller's
// guarantee.
//
// Only what the backend writes is fenced. A request that changes nothing
// (a no-op Write, deleting what is gone) succeeds without a backend write,
// and so without looking at the fence: it cannot clobber anything.
//
// A fence is a question to the store (does this key exist, with this
// create revision?), so it is checked before any: the caller must be
// allowed to present fences (resource.CapabilityFence), else
// PermissionDenied; and the backend, when it fences
// (storage.FenceChecker), must accept its key as one of its leader keys,
// else InvalidArgument.
func (s *Server) withFence(ctx context.Context, authz resource.Authorizer) (context.Context, error) {
	values := metadata.ValueFromIncomingContext(ctx, resource.FenceMetadataKey)
	switch len(values) {
	case 0:
		return ctx, nil
	case 1:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "metadata %s: given %d times, want at most one fence",
			resource.FenceMetadataKey, len(values))
	}
	key, rev, err := resource.ParseFence(values[0])
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "metadata %s: %s: %v", resource.FenceMetadataKey, resource.Quote(values[0]), err)
	}
	if !resource.HasCapability(authz, resource.CapabilityFence) {
		return nil, status.Errorf(codes.PermissionDenied,
			"metadata %s: this caller may not present a fence (with an ACL file, a token needs a {capability: fence} rule)", resource.FenceMetadataKey)
	}
	f := storage.Fence{Key: key, Revision: rev}
	if fc, ok := s.backend.(storage.FenceChecker); ok {
		if err := fc.CheckFence(f); err != nil {
			return nil, fenceKeyError(key, err)
		}
	}
	return storage.WithFence(ctx, f), nil
}

// fenceKeyError is the InvalidArgument of a fence whose key the backend
// refused (storage.ErrInvalidFence).
func fenceKeyError(key string, err error) error {
	return status.Errorf(codes.InvalidArgument, "metadata %s: key %s: %v", resource.FenceMetadataKey, resource.Quote(key), err)
}

// fencedError is the FailedPrecondition a fenced write that the backend
// refused gets, told apart from other failures for the log.
type fencedError struct{ st *status.Status }

func (e fencedError) Error() string              { return e.st.Err().Error() }
func (e fencedError) GRPCStatus() *status.Status { return e.st }

// fencedMessage is the message of the FailedPrecondition a fenced write
// that the backend refused gets.
const fencedMessage = "write fenced: leadership has moved"
