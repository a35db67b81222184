package pbresource

import (
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Unbatched returns a WatchList stream whose Recv hands out the events of
// stream one at a time: the events of each Batch in order, then the next
// message's. A client that sets WatchListRequest.batch_events reads its
// stream through it and sees exactly the stream it would have had without
// batches. A Batch inside a Batch, which no server sends, ends the stream
// with Internal. Other methods are stream's.
func Unbatched(stream grpc.ServerStreamingClient[WatchEvent]) grpc.ServerStreamingClient[WatchEvent] {
	return &unbatched{ServerStreamingClient: stream}
}

type unbatched struct {
	grpc.ServerStreamingClient[WatchEvent]
	pending []*WatchEvent // the rest of the last Batch
}

func (u *unbatched) Recv() (*WatchEvent, error) {
	for len(u.pending) == 0 {
		ev, err := u.ServerStreamingClient.Recv()
		if err != nil {
			return nil, err
		}
		b, ok := ev.Event.(*WatchEvent_Batch_)
		if !ok {
			return ev, nil
		}
		u.pending = b.Batch.GetEvents()
	}
	// The Batch is left as received: what a stream hands out is never
	// changed.
	ev := u.pending[0]
	u.pending = u.pending[1:]
	if _, ok := ev.Event.(*WatchEvent_Batch_); ok {
		u.pending = nil
		return nil, status.Error(codes.Internal, "WatchList: a batch of events held another batch")
	}
	return ev, nil
}

// RecvMsg receives the next event into m, which must be a *WatchEvent.
func (u *unbatched) RecvMsg(m any) error {
	out, ok := m.(*WatchEvent)
	if !ok {
		return status.Errorf(codes.Internal, "WatchList: RecvMsg needs a *WatchEvent, not %T", m)
	}
	ev, err := u.Recv()
	if err != nil {
		return err
	}
	proto.Reset(out)
	proto.Merge(out, ev)
	return nil
}
