package server

import (
	"context"
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// inprocWatchBuffer is how many events the in-process WatchList stream holds
// between the server side and a Recv (besides the batch Recv is handing
// out). When it is full the server side waits, and the backend keeps the
// watch's place until it gives up on it.
const inprocWatchBuffer = 64

// NewInProcessClient returns a client that calls s directly, without gRPC
// marshalling or a network. It follows the rule in the resource package doc
// ("Who may change a message"): what a call returns is the caller's own
// copy, while a WatchList stream hands out the server's own events, the same
// message on every stream, which nobody may change. Requests are passed as
// they are, since the server never changes a request nor keeps any part of
// it. Outgoing gRPC metadata on the context (e.g. x-consul-consistency-mode)
// is handed to the server as incoming metadata; incoming metadata the
// caller's context may carry is not. Errors are the server's status errors,
// unchanged. Call options are ignored, but for resource.ResponseUnread.
//
// A WatchList stream runs the server's WatchList in a goroutine; it ends
// when the server side returns (its error is what Recv returns after the
// buffered events) or when the caller's context is cancelled, which the
// caller must do if it stops receiving before the stream ends.
func NewInProcessClient(s *Server) pbresource.ResourceServiceClient {
	return &inprocClient{s: s}
}

type inprocClient struct {
	s *Server
	// caller: calls are checked as a network caller's (NewCallerClient),
	// not marked as made in process.
	caller bool
}

// NewCallerClient returns a client that calls s directly, as
// NewInProcessClient does, but on a user's behalf: its calls are not
// marked as made in process (InProcess is false), so with ACLs on each is
// checked against the token in its outgoing metadata
// (resource.TokenMetadataKey), as a network caller's would be. It is for
// other front ends of the server in its process (the web console).
func NewCallerClient(s *Server) pbresource.ResourceServiceClient {
	return &inprocClient{s: s, caller: true}
}

var _ pbresource.ResourceServiceClient = (*inprocClient)(nil)

// serverContext turns the caller's outgoing metadata into the incoming
// metadata the server sees, and marks the call as made in process when the
// server resolves ACLs (see InProcess; otherwise nothing asks).
func (c *inprocClient) serverContext(ctx context.Context) context.Context {
	if c.s.resolve != nil && !c.caller {
		ctx = context.WithValue(ctx, inProcessKey{}, true)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	if len(md) == 0 {
		if _, ok := metadata.FromIncomingContext(ctx); !ok {
			return ctx // nothing to hand over, nothing to hide: no new context
		}
	}
	return metadata.NewIncomingContext(ctx, md)
}

// inProcessKey marks the context of a call made through an in-process
// client. Context values never come from the wire, so no network caller
// can set it.
type inProcessKey struct{}

// InProcess reports whether ctx is the context of a call made through a
// client from NewInProcessClient on a server with an ACL resolver: the
// host's own controllers and reaper, which a network caller cannot pose
// as. An ACL resolver may let such calls through (see TrustInProcess).
func InProcess(ctx context.Context) bool {
	v, _ := ctx.Value(inProcessKey{}).(bool)
	return v
}

// TrustInProcess returns an ACL resolver that allows everything to calls
// made in process (InProcess) and asks resolve about every other: what a
// host with ACLs on gives its server, so that its own controllers and
// reaper are never blocked while every network caller is checked.
func TrustInProcess(resolve func(context.Context) (resource.Authorizer, error)) func(context.Context) (resource.Authorizer, error) {
	return func(ctx context.Context) (resource.Authorizer, error) {
		if InProcess(ctx) {
			return resource.AllowAll, nil
		}
		return resolve(ctx)
	}
}

func (c *inprocClient) Read(ctx context.Context, in *pbresource.ReadRequest, _ ...grpc.CallOption) (*pbresource.ReadResponse, error) {
	out, err := c.s.Read(c.serverContext(ctx), in)
	if err != nil {
		return nil, err
	}
	return &pbresource.ReadResponse{Resource: resource.Clone(out.Resource)}, nil
}

// Write returns a copy of the written resource, or with
// resource.ResponseUnread the stored resource itself, uncopied: its caller
// reads at most its Version, and never changes it.
func (c *inprocClient) Write(ctx context.Context, in *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	out, err := c.s.Write(c.serverContext(ctx), in)
	if err != nil {
		return nil, err
	}
	// out is the call's own (the server keeps no response), but its
	// resource is the stored one.
	if !resource.IsResponseUnread(opts) {
		out.Resource = resource.Clone(out.Resource)
	}
	return out, nil
}

// WriteStatus returns a copy of the written resource, or with
// resource.ResponseUnread the stored resource itself, uncopied: its caller
// reads at most its Version, and never changes it.
func (c *inprocClient) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	out, err := c.s.WriteStatus(c.serverContext(ctx), in)
	if err != nil {
		return nil, err
	}
	// As in Write: out is the call's own, its resource the stored one.
	if !resource.IsResponseUnread(opts) {
		out.Resource = resource.Clone(out.Resource)
	}
	return out, nil
}

func (c *inprocClient) List(ctx context.Context, in *pbresource.ListRequest, _ ...grpc.CallOption) (*pbresource.ListResponse, error) {
	out, err := c.s.List(c.serverContext(ctx), in)
	if err != nil {
		return nil, err
	}
	return cloneListResponse(out), nil
}

func (c *inprocClient) ListByOwner(ctx context.Context, in *pbresource.ListByOwnerRequest, _ ...grpc.CallOption) (*pbresource.ListByOwnerResponse, error) {
	out, err := c.s.ListByOwner(c.serverContext(ctx), in)
	if err != nil {
		return nil, err
	}
	return cloneListByOwnerResponse(out), nil
}

func (c *inprocClient) Delete(ctx context.Context, in *pbresource.DeleteRequest, _ ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	if _, err := c.s.Delete(c.serverContext(ctx), in); err != nil {
		return nil, err
	}
	return &pbresource.DeleteResponse{}, nil
}

func (c *inprocClient) MutateAndValidate(ctx context.Context, in *pbresource.MutateAndValidateRequest, _ ...grpc.CallOption) (*pbresource.MutateAndValidateResponse, error) {
	out, err := c.s.MutateAndValidate(c.serverContext(ctx), in)
	if err != nil {
		return nil, err
	}
	return &pbresource.MutateAndValidateResponse{Resource: resource.Clone(out.Resource)}, nil
}

func (c *inprocClient) WatchList(ctx context.Context, in *pbresource.WatchListRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	ctx, cancel := context.WithCancel(ctx)
	st := &inprocWatch{
		ctx:   ctx,
		done:  make(chan struct{}),
		ready: make(chan struct{}, 1),
		space: make(chan struct{}, 1),
	}
	srv := &inprocWatchServer{ctx: c.serverContext(ctx), st: st, shuttingDown: c.s.shuttingDown.Done()}
	go func() {
		defer cancel()
		st.err = c.s.WatchList(in, srv)
		close(st.done)
	}()
	return st, nil
}

// inprocWatch is the client side of an in-process WatchList stream. The
// server side appends events to queue; Recv takes the whole queue at once
// into batch and hands its events out one by one, so the two sides meet
// (lock, and wake the other only if it waits) once per batch rather than
// once per event.
type inprocWatch struct {
	ctx   context.Context
	done  chan struct{} // closed when the server side returned
	err   error         // what it returned; read only after done
	ready chan struct{} // capacity 1: wakes a Recv waiting for events
	space chan struct{} // capacity 1: wakes a Send waiting for room

	// Consumer side: only the goroutine calling Recv.
	batch []*pbresource.WatchEvent
	pos   int

	mu          sync.Mutex
	queue       []*pbresource.WatchEvent // sent, not yet taken
	recvWaiting bool
	sendWaiting bool
}

var _ grpc.ServerStreamingClient[pbresource.WatchEvent] = (*inprocWatch)(nil)

// Recv returns the next event; after the server side ended and every event
// was received, its error, or io.EOF if it ended without one.
func (w *inprocWatch) Recv() (*pbresource.WatchEvent, error) {
	for {
		if w.pos < len(w.batch) {
			ev := w.batch[w.pos]
			w.batch[w.pos] = nil
			w.pos++
			return ev, nil
		}
		w.mu.Lock()
		if len(w.queue) > 0 {
			w.batch, w.queue, w.pos = w.queue, w.batch[:0], 0
			wake := w.sendWaiting
			w.sendWaiting = false
			w.mu.Unlock()
			if wake {
				select {
				case w.space <- struct{}{}:
				default:
				}
			}
			continue
		}
		w.recvWaiting = true
		w.mu.Unlock()
		select {
		case <-w.ready:
			continue
		case <-w.done:
		}
		// The server side returned: what it sent before is in the queue.
		w.mu.Lock()
		more := len(w.queue) > 0
		w.mu.Unlock()
		if more {
			continue
		}
		if w.err == nil {
			return nil, io.EOF
		}
		return nil, w.err
	}
}

func (w *inprocWatch) Header() (metadata.MD, error) { return metadata.MD{}, nil }
func (w *inprocWatch) Trailer() metadata.MD         { return metadata.MD{} }
func (w *inprocWatch) CloseSend() error             { return nil }
func (w *inprocWatch) Context() context.Context     { return w.ctx }

func (w *inprocWatch) SendMsg(any) error {
	return errors.New("in-process WatchList: the request was already sent")
}

func (w *inprocWatch) RecvMsg(m any) error {
	ev, err := w.Recv()
	if err != nil {
		return err
	}
	msg, ok := m.(proto.Message)
	if !ok {
		return errors.New("in-process WatchList: RecvMsg needs a *pbresource.WatchEvent")
	}
	proto.Reset(msg)
	proto.Merge(msg, ev)
	return nil
}

// inprocWatchServer is the server side of an in-process WatchList stream:
// Send puts each event into the client's queue, waiting while it is full
// (until the stream ends or the server shuts down). It hands over the event
// itself, not a copy: what is sent on a watch is immutable (see the resource
// package doc), for the server and the receiver alike.
type inprocWatchServer struct {
	ctx          context.Context
	st           *inprocWatch
	shuttingDown <-chan struct{} // the Server's; closed by Shutdown
}

var _ grpc.ServerStreamingServer[pbresource.WatchEvent] = (*inprocWatchServer)(nil)

func (s *inprocWatchServer) Send(ev *pbresource.WatchEvent) error {
	w := s.st
	for {
		w.mu.Lock()
		if len(w.queue) < inprocWatchBuffer {
			w.queue = append(w.queue, ev)
			wake := w.recvWaiting
			w.recvWaiting = false
			w.mu.Unlock()
			if wake {
				select {
				case w.ready <- struct{}{}:
				default:
				}
			}
			return nil
		}
		w.sendWaiting = true
		w.mu.Unlock()
		select {
		case <-w.space:
		case <-s.ctx.Done():
			return status.FromContextError(s.ctx.Err()).Err()
		case <-s.shuttingDown:
			return ErrShuttingDown
		}
	}
}

func (s *inprocWatchServer) SetHeader(metadata.MD) error  { return nil }
func (s *inprocWatchServer) SendHeader(metadata.MD) error { return nil }
func (s *inprocWatchServer) SetTrailer(metadata.MD)       {}
func (s *inprocWatchServer) Context() context.Context     { return s.ctx }

func (s *inprocWatchServer) SendMsg(m any) error {
	ev, ok := m.(*pbresource.WatchEvent)
	if !ok {
		return errors.New("in-process WatchList: SendMsg needs a *pbresource.WatchEvent")
	}
	return s.Send(ev)
}

func (s *inprocWatchServer) RecvMsg(any) error {
	return errors.New("in-process WatchList: the request was already received")
}

// cloneListResponse copies out, which holds the server's stored messages.
func cloneListResponse(out *pbresource.ListResponse) *pbresource.ListResponse {
	return &pbresource.ListResponse{Resources: cloneResources(out.Resources), NextPageToken: out.NextPageToken, Version: out.Version}
}

func cloneListByOwnerResponse(out *pbresource.ListByOwnerResponse) *pbresource.ListByOwnerResponse {
	return &pbresource.ListByOwnerResponse{Resources: cloneResources(out.Resources), NextPageToken: out.NextPageToken, Version: out.Version}
}
