package server

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
)

// Batches of watch events (WatchListRequest.batch_events).
//
// A batched stream runs its watch in a goroutine of its own (the reader),
// which puts each event the caller may read into a queue of at most
// maxBatchEvents; the handler's goroutine (the sender) takes whatever is
// queued whenever it is ready to send and sends it as one Batch, or as a
// single event when one is all there is. Nothing waits for a batch to
// fill: when the client keeps up, most messages hold one event; when the
// sender is slower than the events come (a burst, or gRPC's flow control),
// the queue fills and the per-message cost is shared by up to
// maxBatchEvents events. A client that stops reading stops the sender,
// then the reader, and the backend treats the watch as it would any that
// falls behind.
//
// With the codec of ServerOptions, a batch is built from the encoded
// events: the changes the backend shares between watches are marshalled
// once for all streams (watch_encode.go) and copied into the batch with a
// tag and a length each; the snapshot's events are marshalled straight
// into it. The sender hands gRPC a real Batch message (interceptors see
// it), whose bytes the codec finds in the server's cache. Without the
// codec, gRPC marshals the Batch message itself.

const (
	// maxBatchEvents bounds the events of one batch, and of the queue
	// between a batched stream's reader and sender.
	maxBatchEvents = 1024
	// maxBatchBytes bounds the encoded size of a batch message: an eighth
	// of gRPC's default limit on a received message (4 MiB), and large
	// enough that gRPC's cost per message is spread over a thousand small
	// events. An event larger than that is sent alone.
	maxBatchBytes = 512 << 10
	// batchHeader is the most a batch message takes besides its events'
	// tags, lengths and encodings: its own tag and length.
	batchHeader = 1 + 4
)

// sendBatches sends src's events on stream, in batches where more than one
// is at hand (see above). ctx is WatchList's.
func (s *Server) sendBatches(ctx context.Context, stream grpc.ServerStreamingServer[pbresource.WatchEvent], src *watchSource) error {
	readCtx, stopReading := context.WithCancel(ctx)
	q := newEventQueue()
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			ev, shared, err := src.next(readCtx)
			if err == nil && !q.push(readCtx, queuedEvent{ev: ev, shared: shared}, nil) {
				// The sender has stopped, or the stream is ending.
				err = src.ended(readCtx, readCtx.Err())
			}
			if err != nil {
				// The reader always ends the queue, so a sender never waits
				// for it in vain. (An error is queued without waiting.)
				q.push(readCtx, queuedEvent{}, err)
				return
			}
		}
	}()
	// The reader ends before WatchList returns (and closes the watch).
	defer func() {
		stopReading()
		<-read
	}()

	b := batcher{s: s, encode: s.marksEvents(stream)}
	var spare []queuedEvent
	for {
		taken, err := q.take(spare)
		evs := taken
		for len(evs) > 0 {
			if ctx.Err() != nil {
				// The stream or the server is ending: send nothing more.
				return src.ended(ctx, ctx.Err())
			}
			n, sendErr := b.send(stream, evs)
			if sendErr != nil {
				return sendErr
			}
			clear(evs[:n])
			evs = evs[n:]
		}
		if err != nil {
			return err
		}
		spare = taken[:0] // cleared as it was sent
	}
}

// queuedEvent is an event a batched stream's reader has passed on, and
// whether it is a change that other watches may share (see
// watchSource.next).
type queuedEvent struct {
	ev     *pbresource.WatchEvent
	shared bool
}

// eventQueue is the queue between a batched stream's reader and its
// sender. The sender takes the whole queue at once, and the two wake each
// other only when one waits, so they meet once per batch rather than once
// per event (like the in-process client's stream, inproc.go).
type eventQueue struct {
	ready chan struct{} // capacity 1: wakes a sender waiting for events
	space chan struct{} // capacity 1: wakes a reader waiting for room

	mu          sync.Mutex
	queue       []queuedEvent
	err         error // the reader's last word, after the queued events
	takeWaiting bool
	pushWaiting bool
}

func newEventQueue() *eventQueue {
	return &eventQueue{ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// push queues ev, or, when err is not nil, ends the queue with err (ev is
// then ignored) at once. It waits while the queue is full, and reports
// false if ctx ended first (the sender has stopped).
func (q *eventQueue) push(ctx context.Context, ev queuedEvent, err error) bool {
	for {
		q.mu.Lock()
		if err != nil || len(q.queue) < maxBatchEvents {
			if err != nil {
				q.err = err
			} else {
				q.queue = append(q.queue, ev)
			}
			wake := q.takeWaiting
			q.takeWaiting = false
			q.mu.Unlock()
			if wake {
				signal(q.ready)
			}
			return true
		}
		q.pushWaiting = true
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-ctx.Done():
			return false
		}
	}
}

// take waits for events or the end of the queue, then appends every
// queued event to into and returns it, with the queue's error once every
// event before it was taken. into's backing array becomes the queue's.
func (q *eventQueue) take(into []queuedEvent) ([]queuedEvent, error) {
	for {
		q.mu.Lock()
		if len(q.queue) > 0 {
			out := q.queue
			q.queue = into[:0]
			err := q.err
			wake := q.pushWaiting
			q.pushWaiting = false
			q.mu.Unlock()
			if wake {
				signal(q.space)
			}
			return out, err
		}
		if q.err != nil {
			err := q.err
			q.mu.Unlock()
			return into[:0], err
		}
		q.takeWaiting = true
		q.mu.Unlock()
		// The reader always ends the queue before it returns.
		<-q.ready
	}
}

// signal wakes whoever waits on c, a channel of capacity 1.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// batcher builds and sends the batches of one stream.
type batcher struct {
	s *Server
	// encode: the stream sends through the codec of ServerOptions, so
	// batches are built from encoded events (see above).
	encode bool
	// scratch holds the snapshot's events marshalled for the batch being
	// built; parts the encoding of each of its events.
	scratch []byte
	parts   [][]byte
}

// send sends the first of evs, as many as fit in one batch, and returns
// how many it sent.
func (b *batcher) send(stream grpc.ServerStreamingServer[pbresource.WatchEvent], evs []queuedEvent) (int, error) {
	if len(evs) == 1 {
		return 1, b.sendOne(stream, evs[0])
	}
	if !b.encode {
		return b.sendUnencoded(stream, evs)
	}
	b.scratch, b.parts = b.scratch[:0], b.parts[:0]
	size := 0
	for _, qe := range evs[:min(len(evs), maxBatchEvents)] {
		part, err := b.encoded(qe)
		if err != nil {
			return 0, err
		}
		n := protowire.SizeTag(pblayout.BatchEvents) + protowire.SizeBytes(len(part))
		if len(b.parts) > 0 && batchHeader+size+n > maxBatchBytes {
			break
		}
		b.parts = append(b.parts, part)
		size += n
	}
	if len(b.parts) == 1 {
		return 1, b.sendOne(stream, evs[0])
	}
	// WatchEvent{batch: Batch{events: part...}}, in one buffer.
	buf := make([]byte, 0, protowire.SizeTag(pblayout.WatchEventBatch)+protowire.SizeBytes(size))
	buf = protowire.AppendTag(buf, pblayout.WatchEventBatch, protowire.BytesType)
	buf = protowire.AppendVarint(buf, uint64(size))
	for _, part := range b.parts {
		buf = protowire.AppendTag(buf, pblayout.BatchEvents, protowire.BytesType)
		buf = protowire.AppendBytes(buf, part)
	}
	n := len(b.parts)
	clear(b.parts)
	batch := batchEvent(evs[:n])
	b.s.encoded.putBatch(batch, mem.SliceBuffer(buf))
	err := stream.Send(batch)
	b.s.encoded.dropBatch(batch)
	return n, err
}

// encoded returns qe's encoding: shared with other streams for a change,
// else marshalled into scratch.
func (b *batcher) encoded(qe queuedEvent) ([]byte, error) {
	if qe.shared {
		buf, err := b.s.encoded.encode(qe.ev)
		if err != nil {
			return nil, err
		}
		return buf.ReadOnlyData(), nil
	}
	start := len(b.scratch)
	var err error
	// Earlier parts stay valid if append moves scratch: they keep the old
	// array, which nothing writes to again.
	b.scratch, err = proto.MarshalOptions{}.MarshalAppend(b.scratch, qe.ev)
	if err != nil {
		return nil, err
	}
	return b.scratch[start:], nil
}

// sendOne sends one event as it is.
func (b *batcher) sendOne(stream grpc.ServerStreamingServer[pbresource.WatchEvent], qe queuedEvent) error {
	if b.encode && qe.shared {
		b.s.encoded.mark(qe.ev)
	}
	return stream.Send(qe.ev)
}

// sendUnencoded sends the first of evs as one Batch message for gRPC's
// codec to marshal, as many as fit, and returns how many it sent.
func (b *batcher) sendUnencoded(stream grpc.ServerStreamingServer[pbresource.WatchEvent], evs []queuedEvent) (int, error) {
	size, n := 0, 0
	for _, qe := range evs[:min(len(evs), maxBatchEvents)] {
		m := proto.Size(qe.ev)
		m = protowire.SizeTag(pblayout.BatchEvents) + protowire.SizeBytes(m)
		if n > 0 && batchHeader+size+m > maxBatchBytes {
			break
		}
		size += m
		n++
	}
	if n == 1 {
		return 1, b.sendOne(stream, evs[0])
	}
	return n, stream.Send(batchEvent(evs[:n]))
}

// batchEvent returns a WatchEvent holding evs as a Batch. It is sent like
// any event, so it has its own slice: nothing changes it afterwards.
func batchEvent(evs []queuedEvent) *pbresource.WatchEvent {
	events := make([]*pbresource.WatchEvent, len(evs))
	for i, qe := range evs {
		events[i] = qe.ev
	}
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Batch_{Batch: &pbresource.WatchEvent_Batch{Events: events}}}
}
