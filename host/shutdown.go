package host

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/loomrt/loom/server"
)

// stopGRPC stops gs once shutdown has begun (the ResourceService's watches
// and the other streams have been told to end): GracefulStop, which refuses
// new RPCs and waits for every connection to drain, cut short by Stop, which
// closes the connections still open, when
//
//   - streamGrace has passed since the start and no unary RPC has run for
//     streamGrace (so its response had time to go out), or
//   - timeout has passed, whatever is running.
//
// The first is what keeps clients that do not read from holding shutdown
// for the whole timeout. gRPC flow control holds a stream's final status
// behind the events its client has not read, so such a stream never ends
// and its connection never drains; its handler may even be blocked in Send,
// which only returns when the stream's transport ends (Stop). Clients that
// read get their final status (Unavailable "server is shutting down")
// within streamGrace; those that do not see their connection close.
func stopGRPC(gs *grpc.Server, unary *unaryTracker, timeout, streamGrace time.Duration, logger hclog.Logger) {
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	quiet := time.NewTimer(min(streamGrace, timeout))
	defer quiet.Stop()
	var idle <-chan struct{} // while a unary RPC runs: closed when none does
wait:
	for {
		select {
		case <-stopped:
			return
		case <-deadline.C:
			logger.Warn("requests still running after the shutdown timeout; closing their connections")
			break wait
		case <-idle:
			idle = nil
			quiet.Reset(streamGrace)
		case <-quiet.C:
			running, lastEnd, idleCh := unary.state()
			if running {
				idle = idleCh
				continue
			}
			if rest := streamGrace - time.Since(lastEnd); rest > 0 {
				quiet.Reset(rest)
				continue
			}
			logger.Info("streams still open after they were ended (clients not reading?); closing their connections")
			break wait
		}
	}
	gs.Stop()
	<-stopped
}

// unaryTracker follows the unary RPCs running, through its interceptor.
// The zero value is ready to use.
type unaryTracker struct {
	mu      sync.Mutex
	running int
	lastEnd time.Time     // when the last one ended
	idle    chan struct{} // made when running leaves 0, closed when it is back
}

// intercept is a grpc.UnaryServerInterceptor that counts the call.
func (u *unaryTracker) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	u.mu.Lock()
	if u.running == 0 {
		u.idle = make(chan struct{})
	}
	u.running++
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.running--
		if u.running == 0 {
			u.lastEnd = time.Now()
			close(u.idle)
		}
		u.mu.Unlock()
	}()
	return handler(ctx, req)
}

// state reports whether a unary RPC is running, when the last one ended,
// and, while one runs, a channel closed when none does.
func (u *unaryTracker) state() (running bool, lastEnd time.Time, idle <-chan struct{}) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.running > 0, u.lastEnd, u.idle
}

// endStreamsOnShutdown cancels the context of every streaming RPC once
// shuttingDown ends (the ResourceService ends its WatchLists itself, at
// svc.Shutdown; this covers the others, such as the health service's
// Watch). GracefulStop waits for handlers to return, and a stream like a
// watch only returns when its context ends, so without this one open stream
// would hold shutdown for the whole timeout. A stream ended this way reports
// Unavailable, which tells the client to retry against another server.
func endStreamsOnShutdown(shuttingDown context.Context) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, cancel := context.WithCancel(ss.Context())
		defer cancel()
		stop := context.AfterFunc(shuttingDown, cancel)
		defer stop()
		err := handler(srv, streamWithContext{ServerStream: ss, ctx: ctx})
		if err != nil && shuttingDown.Err() != nil && ss.Context().Err() == nil {
			return server.ErrShuttingDown
		}
		return err
	}
}

type streamWithContext struct {
	grpc.ServerStream
	ctx context.Context
}

func (s streamWithContext) Context() context.Context { return s.ctx }
