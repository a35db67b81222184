package etcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/storage"
)

var (
	// ErrCompacted ends a watch whose next events etcd no longer has: the
	// revisions it needed were compacted away (see docs/operations.md on
	// compaction). The error Next returns wraps both this and etcd's own
	// rpctypes.ErrCompacted. Nothing is lost for the consumer: it starts a
	// new WatchList, whose snapshot is the current state, as it does after
	// any watch error.
	ErrCompacted = errors.New("etcd: watch ended: the revisions it needed have been compacted")

	// ErrOutcomeUnknown is storage.ErrOutcomeUnknown: a write was sent to
	// etcd but no answer came back (a timeout, a lost connection, a leader
	// change while it was in flight), so it may or may not have been
	// applied. The error wraps etcd's; storage.ErrInconsistent is not used
	// for it, because that one promises the write was not applied. Read the
	// resource to find out.
	ErrOutcomeUnknown = storage.ErrOutcomeUnknown
)

// unavailable reports whether err is etcd (or the connection to it) saying
// it cannot serve requests that need a quorum right now.
func unavailable(err error) bool {
	if errorsIs(err, errCallTimeout, rpctypes.ErrNoLeader, rpctypes.ErrNotCapable, rpctypes.ErrStopped,
		rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, rpctypes.ErrTimeoutDueToConnectionLost,
		rpctypes.ErrTimeoutWaitAppliedIndex, rpctypes.ErrLeaderChanged, rpctypes.ErrUnhealthy,
		rpctypes.ErrTooManyRequests) {
		return true
	}
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code() == codes.Unavailable
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// notApplied reports whether err from a write means etcd refused it before
// proposing it to the cluster.
func notApplied(err error) bool {
	return errorsIs(err, rpctypes.ErrNoLeader, rpctypes.ErrNotCapable, rpctypes.ErrTooManyRequests)
}

// contextError returns ctx's error, keeping etcd's message, when ctx ended.
func contextError(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		if err == nil || errors.Is(err, ctxErr) {
			return ctxErr
		}
		return fmt.Errorf("%w (etcd: %v)", ctxErr, err)
	}
	return nil
}

// readError maps the error of a read.
func readError(ctx context.Context, err error) error {
	if cerr := contextError(ctx, err); cerr != nil {
		return cerr
	}
	if unavailable(err) {
		return fmt.Errorf("%w: etcd: %w", storage.ErrInconsistent, err)
	}
	return fmt.Errorf("etcd: %w", err)
}

// tooLarge reports whether err is etcd, or the gRPC connection to it,
// refusing a request for its size: over etcd's --max-request-bytes, or
// over a gRPC message limit of the client or the server.
func tooLarge(err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.InvalidArgument:
		return st.Message() == rpctypes.ErrorDesc(rpctypes.ErrGRPCRequestTooLarge)
	case codes.ResourceExhausted:
		// grpc-go: "trying to send message larger than max" (client) or
		// "received message larger than max" (server).
		return strings.Contains(st.Message(), "message larger than max")
	}
	return false
}

// writeError maps the error of a transaction.
func writeError(ctx context.Context, err error) error {
	switch {
	case tooLarge(err):
		// Refused before it was proposed: not applied.
		return fmt.Errorf("%w: etcd: %w", storage.ErrTooLarge, err)
	case notApplied(err):
		return fmt.Errorf("%w: etcd: %w", storage.ErrInconsistent, err)
	case ctx.Err() != nil:
		// Perhaps sent, and perhaps applied.
		return &outcomeUnknownError{err: fmt.Errorf("%w: %w", ctx.Err(), err)}
	case unavailable(err):
		return &outcomeUnknownError{err: err}
	}
	return fmt.Errorf("etcd: %w", err)
}

// outcomeUnknownError is an ErrOutcomeUnknown with its cause. It carries
// the gRPC status Unavailable, so a ResourceService that does not know
// this package still tells its client to retry (a retried compare-and-swap
// is safe: if the first attempt landed, the retry fails the compare) —
// unless the cause is the caller's context, whose error it wraps.
type outcomeUnknownError struct{ err error }

func (e *outcomeUnknownError) Error() string {
	return "etcd: " + ErrOutcomeUnknown.Error() + ": " + e.err.Error()
}
func (e *outcomeUnknownError) Unwrap() []error {
	return []error{ErrOutcomeUnknown, e.err}
}

// GRPCStatus is the status a gRPC server reports for this error.
func (e *outcomeUnknownError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}
