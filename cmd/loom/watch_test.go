package main

import (
	"bytes"
	"context"
	"errors"
	"slices"
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
	since   []string // each call's since_version
}

type fakeStream struct {
	grpc.ServerStreamingClient[pbresource.WatchEvent]
	ctx    context.Context
	events []*pbresource.WatchEvent
	end    error // nil: block until ctx ends
}

func (f *fakeWatcher) WatchList(ctx context.Context, req *pbresource.WatchListRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.since = append(f.since, req.SinceVersion)
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
	err := watchLoop(context.Background(), f, &pbresource.WatchListRequest{}, w, &stderr, retry.NewBackOff(time.Millisecond, 2*time.Millisecond), nil)
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
		done <- watchLoop(ctx, f, &pbresource.WatchListRequest{}, w, &stderr, retry.NewBackOff(time.Hour, time.Hour), nil)
	}()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("interrupted watch returned %v, want nil", err)
	}
}

// A stream that breaks is watched again from the last version it printed;
// when the server refuses that version, afresh.
func TestWatchResumes(t *testing.T) {
	eos := &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{Version: "5"}}}
	upsert := func(v string) *pbresource.WatchEvent {
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: &pbresource.Resource{Version: v}}}}
	}
	bookmark := &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Bookmark_{Bookmark: &pbresource.WatchEvent_Bookmark{Version: "9"}}}
	unavailable := status.Error(codes.Unavailable, "going away")
	f := &fakeWatcher{streams: []fakeStream{
		// Versions inside a snapshot are no resume point: a break there
		// resumes from where the command started.
		{events: []*pbresource.WatchEvent{upsert("3")}, end: unavailable},
		{events: []*pbresource.WatchEvent{upsert("2"), eos, upsert("7")}, end: unavailable},
		{events: []*pbresource.WatchEvent{bookmark}, end: unavailable},
		{end: status.Error(codes.OutOfRange, "since_version 9 is ahead of the store")},
		{events: []*pbresource.WatchEvent{eos}, end: status.Error(codes.PermissionDenied, "no")},
	}}
	var stdout, stderr bytes.Buffer
	types := &typeResolver{ctx: context.Background(), noServer: errors.New("none")}
	w := &eventWriter{p: &printer{format: formatJSON, types: types, stdout: &stdout, stderr: &stderr, now: time.Now, warned: map[string]bool{}}}
	err := watchLoop(context.Background(), f, &pbresource.WatchListRequest{}, w, &stderr, retry.NewBackOff(time.Millisecond, 2*time.Millisecond), nil)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("watchLoop returned %v, want the PermissionDenied that ended the last stream", err)
	}
	if want := []string{"", "", "7", "9", ""}; !slices.Equal(f.since, want) {
		t.Errorf("since_version of each watch: %q, want %q", f.since, want)
	}
	if !strings.Contains(stdout.String(), `{"bookmark":{"version":"9"}}`) || !strings.Contains(stdout.String(), `{"endOfSnapshot":{"version":"5"}}`) {
		t.Errorf("printed %s; want the bookmark and the end of snapshot with their versions", stdout.String())
	}

	// -since that the server refuses is the command's error.
	f = &fakeWatcher{streams: []fakeStream{{end: status.Error(codes.OutOfRange, "since_version 9 is ahead of the store")}}}
	err = watchLoop(context.Background(), f, &pbresource.WatchListRequest{SinceVersion: "9"}, w, &stderr, retry.NewBackOff(time.Millisecond, 2*time.Millisecond), nil)
	if status.Code(err) != codes.OutOfRange || f.calls != 1 {
		t.Errorf("watch -since refused: %v after %d watches, want OutOfRange after 1", err, f.calls)
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
	err := watchLoop(context.Background(), f, &pbresource.WatchListRequest{}, w, &stderr, retry.NewBackOff(time.Millisecond, 2*time.Millisecond), nil)
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("watchLoop returned %v, want the PermissionDenied that ended the stream", err)
	}
	if n := strings.Count(stdout.String(), "endOfSnapshot"); n != 3 || strings.Contains(stdout.String(), "batch") {
		t.Errorf("printed %q; want three events and no batch", stdout.String())
	}
}
