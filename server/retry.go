package server

import (
	"context"
	"math/rand/v2"
	"runtime"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// maxAttempts bounds the read-modify-write loops of blanket writes. Each
// attempt only fails when another write to the same resource committed in
// between, so running out takes sustained contention on one resource.
const maxAttempts = 50

// maxPause caps the wait between two attempts.
const maxPause = 5 * time.Millisecond

// pause waits before attempt number attempt (1 for the first retry) of a
// read-modify-write loop: the first retries only yield, later ones back off
// with jitter so that contending writers spread out. It fails with Aborted
// once the attempts are used up, or with the context's error.
func pause(ctx context.Context, attempt int) error {
	if attempt >= maxAttempts {
		return status.Errorf(codes.Aborted,
			"gave up after %d attempts: the resource kept changing concurrently; try again", attempt)
	}
	if attempt <= 2 {
		runtime.Gosched()
		if err := ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		return nil
	}
	d := min(time.Duration(attempt*attempt)*10*time.Microsecond, maxPause)
	d = d/2 + rand.N(d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-t.C:
		return nil
	}
}

// readModifyWrite is the loop of Write, WriteStatus and Delete: it reads
// the resource stored under name's name, in whatever GroupVersion and with
// whatever Uid (nil when there is none; see readStored), and hands it to step,
// until step returns something other than errRetry. The first read has
// consistency first; the retries, which follow a lost race or a read that
// may have been stale, pause and read strongly. Errors of the read are
// mapped to statuses; step's are returned as they are.
func (s *Server) readModifyWrite(ctx context.Context, name *pbresource.ID, first storage.ReadConsistency,
	step func(stored *pbresource.Resource, consistency storage.ReadConsistency) error,
) error {
	consistency := first
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if err := pause(ctx, attempt); err != nil {
				return err
			}
			consistency = storage.StrongConsistency
		}
		stored, err := s.readStored(ctx, consistency, name)
		if err != nil {
			return storageError(err)
		}
		if err := step(stored, consistency); err != errRetry {
			return err
		}
	}
}
