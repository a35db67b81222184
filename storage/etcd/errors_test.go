package etcd

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/storage"
)

func TestErrorMapping(t *testing.T) {
	ctx := context.Background()

	// Reads: no leader or quorum is ErrInconsistent.
	for _, err := range []error{rpctypes.ErrNoLeader, rpctypes.ErrTimeout, rpctypes.ErrLeaderChanged, status.Error(codes.Unavailable, "x")} {
		require.ErrorIs(t, readError(ctx, err), storage.ErrInconsistent, "%v", err)
		require.ErrorIs(t, readError(ctx, err), err)
	}
	require.NotErrorIs(t, readError(ctx, rpctypes.ErrCompacted), storage.ErrInconsistent)

	// Writes refused before they were proposed are ErrInconsistent: not
	// applied.
	for _, err := range []error{rpctypes.ErrNoLeader, rpctypes.ErrTooManyRequests} {
		require.ErrorIs(t, writeError(ctx, err), storage.ErrInconsistent, "%v", err)
	}
	// Writes that timed out after they were sent may have landed: not
	// ErrInconsistent, but Unavailable for a gRPC caller.
	for _, err := range []error{rpctypes.ErrTimeout, rpctypes.ErrTimeoutDueToLeaderFail, status.Error(codes.Unavailable, "x")} {
		got := writeError(ctx, err)
		require.ErrorIs(t, got, ErrOutcomeUnknown, "%v", err)
		require.NotErrorIs(t, got, storage.ErrInconsistent)
		require.Equal(t, codes.Unavailable, status.Code(got))
	}

	// A caller's context that ended is reported as such.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, readError(cctx, status.Error(codes.Canceled, "x")), context.Canceled)
	werr := writeError(cctx, status.Error(codes.Canceled, "x"))
	require.ErrorIs(t, werr, context.Canceled)
	require.ErrorIs(t, werr, ErrOutcomeUnknown)

	require.False(t, errors.Is(writeError(ctx, errors.New("other")), storage.ErrInconsistent))

	// A request refused for its size, by etcd or by a gRPC message limit,
	// is ErrTooLarge (and was not applied).
	for _, err := range []error{
		rpctypes.ErrRequestTooLarge, rpctypes.ErrGRPCRequestTooLarge,
		status.Error(codes.ResourceExhausted, "grpc: trying to send message larger than max (3145845 vs. 2097152)"),
		status.Error(codes.ResourceExhausted, "grpc: received message larger than max (3145845 vs. 2097152)"),
	} {
		got := writeError(ctx, err)
		require.ErrorIs(t, got, storage.ErrTooLarge, "%v", err)
		require.NotErrorIs(t, got, ErrOutcomeUnknown)
	}
	require.NotErrorIs(t, writeError(ctx, rpctypes.ErrTooManyRequests), storage.ErrTooLarge)
	require.NotErrorIs(t, writeError(ctx, status.Error(codes.InvalidArgument, "x")), storage.ErrTooLarge)
}

// TestTooLargeResource writes resources bigger than etcd takes in one
// request (--max-request-bytes, 1.5 MiB by default) and than the client
// sends (2 MiB by default): both are storage.ErrTooLarge, not an internal
// error with etcd's raw message, and nothing is stored.
func TestTooLargeResource(t *testing.T) {
	b := newTestBackend(t)
	ctx := testContext(t)
	for name, size := range map[string]int{"over etcd's limit": 1<<20 + 1<<19 + 1, "over the client's limit": 3 << 20} {
		t.Run(name, func(t *testing.T) {
			res := newWidget("big")
			res.Metadata["blob"] = strings.Repeat("x", size)
			_, err := b.WriteCAS(ctx, res)
			require.ErrorIs(t, err, storage.ErrTooLarge)
			_, err = b.Read(ctx, storage.StrongConsistency, res.Id)
			require.ErrorIs(t, err, storage.ErrNotFound)
		})
	}
}

// TestReadsStayMonotonic checks the mechanism behind monotonic eventually
// consistent reads: a member's answer older than what the backend has seen
// is not used.
func TestReadsStayMonotonic(t *testing.T) {
	b := newTestBackend(t)
	res := mustWrite(t, b, newWidget("m"))
	ctx := context.Background()

	_, err := b.Read(ctx, storage.EventualConsistency, res.Id)
	require.NoError(t, err)
	require.Zero(t, b.readFallbacks.Load(), "an up-to-date member answers")

	// Pretend a watch delivered an event from the future: the member is
	// now behind, and the read goes to the leader.
	b.observe(1 << 40)
	got, err := b.Read(ctx, storage.EventualConsistency, res.Id)
	require.NoError(t, err)
	require.Equal(t, res.Version, got.Version)
	require.Equal(t, int64(1), b.readFallbacks.Load())
}
