package server

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/pbdecode"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// serveNarrow is serveLoopback with a client whose streams have gRPC's
// smallest flow-control window (64 KB, which also turns off its growth):
// a stream the test does not read soon holds up the server's sender, so
// the events after it queue and go out in batches.
func serveNarrow(t *testing.T, env *testEnv) pbresource.ResourceServiceClient {
	t.Helper()
	return serveNarrowWith(t, env, env.server.ServerOptions()...)
}

// serveNarrowWith is serveNarrow with a grpc.Server created with opts
// alone.
func serveNarrowWith(t *testing.T, env *testEnv, opts ...grpc.ServerOption) pbresource.ResourceServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	gs := grpc.NewServer(opts...)
	env.server.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return pbresource.NewResourceServiceClient(conn)
}

// countedStream counts the messages of a stream that are batches, and the
// events in them, and checks that each holds at least two events.
type countedStream struct {
	watchStream
	t                *testing.T
	batches, batched int
}

func (c *countedStream) Recv() (*pbresource.WatchEvent, error) {
	ev, err := c.watchStream.Recv()
	if b := ev.GetBatch(); b != nil {
		c.batches++
		c.batched += len(b.Events)
		if len(b.Events) < 2 {
			c.t.Errorf("a batch of %d events", len(b.Events))
		}
	}
	return ev, err
}

// openCounted opens a WatchList stream for req, with or without batches,
// and returns it unbatched with the counter of its batches.
func openCounted(t *testing.T, client pbresource.ResourceServiceClient, req *pbresource.WatchListRequest, batch bool, opts ...grpc.CallOption) (watchStream, *countedStream) {
	t.Helper()
	req = &pbresource.WatchListRequest{Type: req.Type, Tenancy: req.Tenancy, NamePrefix: req.NamePrefix,
		SinceVersion: req.SinceVersion, Bookmarks: req.Bookmarks, BatchEvents: batch}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := client.WatchList(ctx, req, opts...)
	require.NoError(t, err)
	counted := &countedStream{watchStream: stream, t: t}
	return pbresource.Unbatched(counted), counted
}

// describe names an event for comparisons: its kind, its resource's name
// and version, and its own version.
func describe(ev *pbresource.WatchEvent) string {
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		return fmt.Sprintf("upsert %s@%s", e.Upsert.Resource.Id.Name, e.Upsert.Resource.Version)
	case *pbresource.WatchEvent_Delete_:
		return fmt.Sprintf("delete %s@%s at %s", e.Delete.Resource.Id.Name, e.Delete.Resource.Version, e.Delete.Version)
	case *pbresource.WatchEvent_EndOfSnapshot_:
		return "end-of-snapshot at " + e.EndOfSnapshot.Version
	case *pbresource.WatchEvent_NewSnapshot_:
		return "new-snapshot"
	case *pbresource.WatchEvent_Bookmark_:
		return "bookmark at " + e.Bookmark.Version
	}
	return fmt.Sprintf("unexpected %v", ev)
}

// readUntil receives the events of stream up to the first one whose
// description starts with last, and returns them described, Bookmarks left out (how many come
// depends on when the stream was idle); it checks that each Bookmark's
// version is no older than the events before it.
func readUntil(t *testing.T, stream watchStream, last string) []string {
	t.Helper()
	var got []string
	var seen uint64
	for {
		ev := recvEvent(t, stream)
		if bm := ev.GetBookmark(); bm != nil {
			v, err := strconv.ParseUint(bm.Version, 10, 64)
			require.NoError(t, err)
			require.GreaterOrEqual(t, v, seen, "a bookmark older than an event before it")
			continue
		}
		if res := eventResource(ev); res != nil {
			v, err := strconv.ParseUint(res.Version, 10, 64)
			require.NoError(t, err)
			seen = max(seen, v)
		}
		d := describe(ev)
		require.False(t, strings.Contains(d, "secret"), "the stream sent %s, which the caller may not read", d)
		got = append(got, d)
		if strings.HasPrefix(d, last) {
			return got
		}
	}
}

// snapshotPart sorts the events before EndOfSnapshot (a snapshot's order
// is the backend's and need not repeat from one stream to the next).
func snapshotPart(events []string) []string {
	out := slices.Clone(events)
	for i, d := range out {
		if strings.HasPrefix(d, "end-of-snapshot") {
			slices.Sort(out[:i])
			break
		}
	}
	return out
}

// TestWatchListBatchesDeliverTheSameEvents checks that a stream that asks
// for batches gets exactly the events of one that does not, in the same
// order (a snapshot's in any order), with ACLs filtering, bookmarks, a
// resume and a resume that falls back to a snapshot; that it does get
// batches; and that the stream that did not ask gets none.
func TestWatchListBatchesDeliverTheSameEvents(t *testing.T) {
	env := newEnv(t, withACL(func(context.Context) (resource.Authorizer, error) { return readFilter, nil }),
		withBookmarkInterval(50*time.Millisecond), withWatchBuffer(1<<14))
	client := serveNarrow(t, env)
	ctx := testCtx(t)
	// A payload makes the events large enough that a burst fills the
	// client's window.
	payload := strings.Repeat("p", 100)
	write := func(name string, i int) *pbresource.Resource {
		rsp, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
			Id: barID(name), Data: mustAny(t, &pbfoov1.Bar{Baz: payload + strconv.Itoa(i)})}})
		require.NoError(t, err)
		return rsp.Resource
	}
	for i := range 600 {
		write(fmt.Sprintf("public-%d", i), i)
		write(fmt.Sprintf("secret-%d", i), i)
	}
	req := barWatch("", true)
	plain, plainCount := openCounted(t, client, req, false)
	batched, batchCount := openCounted(t, client, req, true)
	// Snapshots: the same resources, the same version, no secrets.
	want := snapshotPart(readUntil(t, plain, "end-of-snapshot"))
	require.Equal(t, want, snapshotPart(readUntil(t, batched, "end-of-snapshot")))
	require.Len(t, want, 600+1, "600 readable resources and EndOfSnapshot")

	// A burst of changes while neither stream is read: creates, updates
	// and deletes of readable and unreadable resources.
	var mid string
	for i := range 600 {
		write(fmt.Sprintf("public-%d", i), i+1000)
		write(fmt.Sprintf("secret-%d", i), i+1000)
		if i%3 == 0 {
			require.NoError(t, env.delete(t, barID(fmt.Sprintf("public-%d", i)), ""))
			require.NoError(t, env.delete(t, barID(fmt.Sprintf("secret-%d", i)), ""))
		}
		if i == 300 {
			mid = write("public-mid", i).Version
		}
	}
	last := write("public-sentinel", 1)
	lastDesc := describe(&pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: last}}})
	want = readUntil(t, plain, lastDesc)
	require.Equal(t, want, readUntil(t, batched, lastDesc))
	require.Len(t, want, 600+200+2)

	// Idle streams get bookmarks, batched or not.
	for _, stream := range []watchStream{plain, batched} {
		ev := recvEvent(t, stream)
		require.NotNil(t, ev.GetBookmark(), "got %v", ev)
		require.Equal(t, last.Version, ev.GetBookmark().Version)
	}

	// A resume from the middle of the burst: the changes after it only.
	resumeReq := barWatch(mid, true)
	plainResumed, plainResumedCount := openCounted(t, client, resumeReq, false)
	batchedResumed, batchedResumedCount := openCounted(t, client, resumeReq, true)
	wantResumed := readUntil(t, plainResumed, lastDesc)
	require.Equal(t, wantResumed, readUntil(t, batchedResumed, lastDesc))
	require.NotContains(t, wantResumed[0], "snapshot")
	i := slices.Index(want, wantResumed[0])
	require.Positive(t, i)
	require.Equal(t, want[i:], wantResumed, "the resumed streams continue the first ones")

	require.Positive(t, batchCount.batches, "the batched stream sent no batch")
	require.Positive(t, batchedResumedCount.batches, "the resumed batched stream sent no batch")
	t.Logf("batched stream: %d batches of %d events in all", batchCount.batches, batchCount.batched)
	require.Zero(t, plainCount.batches, "a stream that did not ask for batches got one")
	require.Zero(t, plainResumedCount.batches, "a stream that did not ask for batches got one")
}

// TestWatchListBatchesNewSnapshot checks a batched resume that the server
// cannot serve: NewSnapshot, the snapshot and EndOfSnapshot, as without
// batches.
func TestWatchListBatchesNewSnapshot(t *testing.T) {
	env := newEnv(t, withWatchBuffer(16))
	client := serveNarrow(t, env)
	first := writeBar(t, env.client, "first")
	for i := range 500 {
		writeBar(t, env.client, fmt.Sprintf("bar-%d", i))
	}
	req := barWatch(first.Version, false)
	plain, plainCount := openCounted(t, client, req, false)
	batched, batchCount := openCounted(t, client, req, true)
	var want []string
	for _, stream := range []watchStream{plain, batched} {
		var got []string
		for {
			d := describe(recvEvent(t, stream))
			got = append(got, d)
			if strings.HasPrefix(d, "end-of-snapshot") {
				break
			}
		}
		require.Equal(t, "new-snapshot", got[0])
		require.Len(t, got, 1+501+1)
		if want == nil {
			want = snapshotPart(got)
		} else {
			require.Equal(t, want, snapshotPart(got))
		}
	}
	require.Positive(t, batchCount.batches)
	require.Zero(t, plainCount.batches)
}

// TestWatchListNoBatchesUnasked checks that a stream whose request does not
// set batch_events gets single events only, also with the codec a Loom
// cache uses, and that one that does gets single events when in process.
func TestWatchListNoBatchesUnasked(t *testing.T) {
	env := newEnv(t)
	client := serveNarrow(t, env)
	for i := range 1000 {
		writeBar(t, env.client, fmt.Sprintf("bar-%d", i))
	}
	streams := map[string]watchStream{}
	counts := map[string]*countedStream{}
	streams["grpc"], counts["grpc"] = openCounted(t, client, barWatch("", false), false)
	streams["pbdecode"], counts["pbdecode"] = openCounted(t, client, barWatch("", false), false, grpc.ForceCodecV2(pbdecode.NewCodec()))
	streams["in-process, asking"], counts["in-process, asking"] = openCounted(t, env.client, barWatch("", false), true)
	streams["batched"], counts["batched"] = openCounted(t, client, barWatch("", false), true)
	// Let the streams' senders block on the client's window, then burst.
	for i := range 1000 {
		writeBar(t, env.client, fmt.Sprintf("more-%d", i))
	}
	last := writeBar(t, env.client, "last")
	for name, stream := range streams {
		t.Run(name, func(t *testing.T) {
			for {
				if recvEvent(t, stream).GetUpsert().GetResource().GetVersion() == last.Version {
					break
				}
			}
			if name == "batched" {
				require.Positive(t, counts[name].batches)
			} else {
				require.Zero(t, counts[name].batches)
			}
		})
	}
}

// TestWatchListBatchesAnyServer checks batched streams on a gRPC server
// without the codec of ServerOptions (gRPC marshals the batches) and on
// one whose interceptor wraps the streams (as a host's do): the same
// events as unbatched, and interceptors see every message as a WatchEvent.
func TestWatchListBatchesAnyServer(t *testing.T) {
	for name, withOptions := range map[string]bool{"no codec": false, "interceptor": true} {
		t.Run(name, func(t *testing.T) {
			env := newEnv(t)
			var opts []grpc.ServerOption
			var sent atomic.Int64
			if withOptions {
				opts = append(env.server.ServerOptions(), grpc.StreamInterceptor(
					func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
						return handler(srv, &sendChecker{ServerStream: ss, t: t, sent: &sent})
					}))
			}
			client := serveNarrowWith(t, env, opts...)
			for i := range 500 {
				writeBar(t, env.client, fmt.Sprintf("bar-%d", i))
			}
			plain, plainCount := openCounted(t, client, barWatch("", false), false)
			batched, batchCount := openCounted(t, client, barWatch("", false), true)
			want := snapshotPart(readUntil(t, plain, "end-of-snapshot"))
			require.Equal(t, want, snapshotPart(readUntil(t, batched, "end-of-snapshot")))
			for i := range 500 {
				writeBar(t, env.client, fmt.Sprintf("more-%d", i))
			}
			last := writeBar(t, env.client, "last")
			lastDesc := "upsert last@" + last.Version
			want = readUntil(t, plain, lastDesc)
			require.Len(t, want, 501)
			require.Equal(t, want, readUntil(t, batched, lastDesc))
			require.Positive(t, batchCount.batches)
			require.Zero(t, plainCount.batches)
			if withOptions {
				require.Positive(t, sent.Load())
			}
		})
	}
}

// sendChecker is a server stream, as an interceptor wraps it, that checks
// every message sent is a WatchEvent.
type sendChecker struct {
	grpc.ServerStream
	t    *testing.T
	sent *atomic.Int64
}

func (s *sendChecker) SendMsg(m any) error {
	if _, ok := m.(*pbresource.WatchEvent); !ok {
		s.t.Errorf("an interceptor saw a %T sent", m)
	}
	s.sent.Add(1)
	return s.ServerStream.SendMsg(m)
}

// fakeSendStream records what a batcher sends, with the encoding the
// codec would have sent for each batch.
type fakeSendStream struct {
	grpc.ServerStreamingServer[pbresource.WatchEvent]
	s       *Server
	encode  bool // batches come with their encoding
	sent    []*pbresource.WatchEvent
	encoded [][]byte // for each batch sent, its encoding; nil for a single event
}

func (f *fakeSendStream) Send(ev *pbresource.WatchEvent) error {
	f.sent = append(f.sent, ev)
	var b []byte
	if ev.GetBatch() != nil {
		if !f.encode {
			b, err := proto.Marshal(ev)
			f.encoded = append(f.encoded, b)
			return err
		}
		buf, ok := f.s.encoded.encodedBatch(ev)
		if !ok {
			return fmt.Errorf("a batch without its encoding")
		}
		b = slices.Clone(buf.ReadOnlyData())
	}
	f.encoded = append(f.encoded, b)
	return nil
}

// TestBatcherBounds checks that batches hold at most maxBatchEvents events
// and maxBatchBytes bytes, that an event larger than that goes alone, and
// that each batch's encoding, built from the events' own, is the batch's.
func TestBatcherBounds(t *testing.T) {
	for _, encode := range []bool{true, false} {
		t.Run(fmt.Sprintf("encode=%v", encode), func(t *testing.T) { testBatcherBounds(t, encode) })
	}
}

func testBatcherBounds(t *testing.T, encode bool) {
	env := newEnv(t)
	if encode {
		env.server.ServerOptions() // the codec is in use
	}
	big := &pbresource.Resource{Id: barID("big"), Version: "7", Data: mustAny(t, &pbfoov1.Bar{Baz: strings.Repeat("b", maxBatchBytes)})}
	var evs []queuedEvent
	for i := range 2*maxBatchEvents + 10 {
		res := &pbresource.Resource{Id: barID(fmt.Sprintf("bar-%d", i)), Version: strconv.Itoa(100 + i)}
		ev := &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: res}}}
		evs = append(evs, queuedEvent{ev: ev, shared: i%2 == 0})
		if i == maxBatchEvents+5 {
			bigEv := &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: big}}}
			evs = append(evs, queuedEvent{ev: bigEv})
		}
	}
	evs = append(evs, queuedEvent{ev: &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Bookmark_{Bookmark: &pbresource.WatchEvent_Bookmark{Version: "9999"}}}})
	stream := &fakeSendStream{s: env.server, encode: encode}
	b := batcher{s: env.server, encode: encode}
	for rest := evs; len(rest) > 0; {
		n, err := b.send(stream, rest)
		require.NoError(t, err)
		require.Positive(t, n)
		rest = rest[n:]
	}
	var got []*pbresource.WatchEvent
	for i, ev := range stream.sent {
		batch := ev.GetBatch()
		if batch == nil {
			got = append(got, ev)
			continue
		}
		require.GreaterOrEqual(t, len(batch.Events), 2)
		require.LessOrEqual(t, len(batch.Events), maxBatchEvents)
		require.LessOrEqual(t, len(stream.encoded[i]), maxBatchBytes)
		decoded := new(pbresource.WatchEvent)
		require.NoError(t, proto.Unmarshal(stream.encoded[i], decoded))
		require.True(t, proto.Equal(ev, decoded), "batch %d's encoding is not the batch", i)
		for _, inner := range batch.Events {
			require.NotSame(t, big, inner.GetUpsert().GetResource(), "the big event was batched")
		}
		got = append(got, batch.Events...)
	}
	require.Len(t, got, len(evs))
	for i := range evs {
		require.Same(t, evs[i].ev, got[i], "event %d", i)
	}
	// Dropped once sent: the codec's map holds no batch.
	require.Empty(t, env.server.encoded.batches)
}

// TestWatchListBatchedStreamsEnd checks that batched streams end as
// unbatched ones do: Aborted when the client stops reading and the backend
// gives up on the watch, Canceled with the client's context, and at
// Shutdown without first sending what is queued.
func TestWatchListBatchedStreamsEnd(t *testing.T) {
	batched := func(t *testing.T, client pbresource.ResourceServiceClient, ctx context.Context) watchStream {
		stream, err := client.WatchList(ctx, &pbresource.WatchListRequest{Type: barID("x").Type, BatchEvents: true})
		require.NoError(t, err)
		stream = pbresource.Unbatched(stream)
		requireSnapshot(t, stream, 0)
		return stream
	}
	drain := func(stream watchStream) (int, error) {
		for n := 0; ; n++ {
			if _, err := stream.Recv(); err != nil {
				return n, err
			}
		}
	}
	t.Run("slow watcher", func(t *testing.T) {
		env := newEnv(t, withWatchBuffer(4))
		stream := batched(t, serveNarrow(t, env), testCtx(t))
		// More than the client's window and the stream's queue hold.
		for i := range 3000 {
			env.write(t, bar(t, fmt.Sprintf("b-%d", i), strings.Repeat("x", 100)))
		}
		_, err := drain(stream)
		requireCode(t, err, codes.Aborted, "WatchList")
	})
	t.Run("cancel", func(t *testing.T) {
		env := newEnv(t)
		ctx, cancel := context.WithCancel(context.Background())
		stream := batched(t, serveNarrow(t, env), ctx)
		for i := range 100 {
			env.write(t, bar(t, fmt.Sprintf("b-%d", i), "x"))
		}
		cancel()
		_, err := drain(stream)
		requireCode(t, err, codes.Canceled)
	})
	t.Run("shutdown", func(t *testing.T) {
		const backlog = 5000
		env := newEnv(t)
		stream := batched(t, serveNarrow(t, env), testCtx(t))
		for i := range backlog {
			env.write(t, bar(t, fmt.Sprintf("b-%d", i), "x"))
		}
		env.server.Shutdown()
		received, err := drain(stream)
		requireShuttingDown(t, err)
		t.Logf("%d of %d queued events received after Shutdown", received, backlog)
		require.Less(t, received, backlog/2, "the stream sent its backlog before ending")
	})
}
