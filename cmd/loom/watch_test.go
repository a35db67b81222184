package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/internal/retry"
	"github.com/loomrt/loom/proto/pbresource"
)

// fakeWatcher answers WatchList with the streams it is given, in order:
// each a list of events and the error that ends it.
type fakeWatcher struct {
	pbresource.ResourceServiceClient
	mu      sync.Mutex
	streams []fakeStream
	calls   int
}

type fakeStream struct {
	grpc.ServerStreamingClient[pbresource.WatchEvent]
	ctx    context.Context
	events []*pbresource.WatchEvent
	end    error // nil: block until ctx ends
}

func (f *fakeWatcher) WatchList(ctx context.Context, _ *pbresource.WatchListRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if len(f.streams) == 0 {
		return nil, status.Error(codes.Unavailable, "no more streams")
	}
	s := f.streams[0]
	f.streams = f.streams[1:]
	s.ctx = ctx
	return &s, nil
}

func (s *fakeStream) Recv() (*pbresource.WatchEvent, error) {
	if len(s.events) > 0 {
		ev := s.events[0]
		s.events = s.events[1:]
		return ev, nil
	}
	if s.end != nil {
		return nil, s.end
	}
	<-s.ctx.Done()
	return nil, status.FromContextError(s.ctx.Err()).Err()
}

func endOfSnapshot() *pbresource.WatchEvent {
	return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{}}}
}

// A stream that ends with Unavailable is watched again; another code ends
// the command with it.
func TestWatchAgainOnUnavailable(t *testing.T) {
	f := &fakeWatcher{streams: []fakeStream{
		{events: []*pbresource.WatchEvent{endOfSnapshot()}, end: status.Error(codes.Unavailable, "server is shutting down")},
		{end: status.Error(codes.Unavailable, "connection refused")},
		{events: []*pbresource.WatchEvent{endOfSnapshot()}, end: status.Error(codes.PermissionDenied, "no")},
	}}
	var stdout, stderr bytes.Buffer
	types := &typeResolver{ctx: context.Background(), noServer: errors.New("none")}
	w := &eventWriter{p: &printer{format: formatJSON, types: types, stdout: &stdout, stderr: &stderr, now: time.Now, warned: map[string]bool{}}}
	err := watchLoop(context.Background(), f, &pbresource.WatchListRequest{}, w, &stderr, retry.NewBackOff(time.Millisecond, 2*time.Millisecond))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("watchLoop returned %v, want the PermissionDenied that ended the third stream", err)
	}
	if f.calls != 3 || strings.Count(stdout.String(), "endOfSnapshot") != 2 {
		t.Errorf("%d watches, printed %q; want 3 watches and two snapshots", f.calls, stdout.String())
	}
	if strings.Count(stderr.String(), "watching again") != 2 || !strings.Contains(stderr.String(), "Unavailable: server is shutting down") {
		t.Errorf("stderr %q, want two notes on watching again", stderr.String())
	}

	// Interrupted while waiting on a stream: nil.
	f = &fakeWatcher{streams: []fakeStream{{events: []*pbresource.WatchEvent{endOfSnapshot()}}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- watchLoop(ctx, f, &pbresource.WatchListRequest{}, w, &stderr, retry.NewBackOff(time.Hour, time.Hour))
	}()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("interrupted watch returned %v, want nil", err)
	}
}

// A batch of events is printed as its events, one by one.
func TestWatchPrintsBatches(t *testing.T) {
	batch := &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Batch_{Batch: &pbresource.WatchEvent_Batch{
		Events: []*pbresource.WatchEvent{endOfSnapshot(), endOfSnapshot()}}}}
	f := &fakeWatcher{streams: []fakeStream{{events: []*pbresource.WatchEvent{batch, endOfSnapshot()}, end: status.Error(codes.PermissionDenied, "no")}}}
	var stdout, stderr bytes.Buffer
	types := &typeResolver{ctx: context.Background(), noServer: errors.New("none")}
	w := &eventWriter{p: &printer{format: formatJSON, types: types, stdout: &stdout, stderr: &stderr, now: time.Now, warned: map[string]bool{}}}
	err := watchLoop(context.Background(), f, &pbresource.WatchListRequest{}, w, &stderr, retry.NewBackOff(time.Millisecond, 2*time.Millisecond))
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("watchLoop returned %v, want the PermissionDenied that ended the stream", err)
	}
	if n := strings.Count(stdout.String(), "endOfSnapshot"); n != 3 || strings.Contains(stdout.String(), "batch") {
		t.Errorf("printed %q; want three events and no batch", stdout.String())
	}
}
