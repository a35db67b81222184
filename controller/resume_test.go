package controller_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/storage/inmem"
)

// streamLog is what one WatchList stream asked for and received.
type streamLog struct {
	since                  string
	upserts, deletes       int
	endOfSnapshot, newSnap int
	bookmarks              int
	batches                int // messages that were batches of events
	bytes                  int // proto.Size of the messages received
	opened, first, last    time.Time
}

// breakableClient records the WatchList streams of the Manager's cache and
// can break the current one, as a network would; with ignoreSince it drops
// since_version and bookmarks from requests, like a server (Consul's) that
// does not know them (it keeps batch_events, which such a server may
// know).
type breakableClient struct {
	pbresource.ResourceServiceClient
	ignoreSince bool

	mu      sync.Mutex
	cancels []context.CancelFunc
	streams []*streamLog
	gate    chan struct{} // while open (nil or closed), streams may open
}

func (c *breakableClient) WatchList(ctx context.Context, in *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	c.mu.Lock()
	gate := c.gate
	c.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	log := &streamLog{since: in.SinceVersion, opened: time.Now()}
	if c.ignoreSince {
		in = &pbresource.WatchListRequest{Type: in.Type, Tenancy: in.Tenancy, NamePrefix: in.NamePrefix, BatchEvents: in.BatchEvents}
	}
	stream, err := c.ResourceServiceClient.WatchList(ctx, in, opts...)
	if err != nil {
		cancel()
		return nil, err
	}
	c.mu.Lock()
	c.cancels = append(c.cancels, cancel)
	c.streams = append(c.streams, log)
	c.mu.Unlock()
	return &loggedStream{ServerStreamingClient: stream, c: c, log: log}, nil
}

// breakStreams ends every open stream, and keeps new ones from opening
// until reopen.
func (c *breakableClient) breakStreams() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.cancels {
		cancel()
	}
	c.cancels = nil
	c.gate = make(chan struct{})
}

// reopen lets streams open again.
func (c *breakableClient) reopen() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.gate)
}

// stream returns a copy of the i-th stream's log, and whether it exists.
func (c *breakableClient) stream(i int) (streamLog, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i >= len(c.streams) {
		return streamLog{}, false
	}
	return *c.streams[i], true
}

type loggedStream struct {
	grpc.ServerStreamingClient[pbresource.WatchEvent]
	c   *breakableClient
	log *streamLog
}

func (s *loggedStream) Recv() (*pbresource.WatchEvent, error) {
	ev, err := s.ServerStreamingClient.Recv()
	if err != nil {
		return nil, err
	}
	size := proto.Size(ev)
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.log.bytes += size
	if s.log.first.IsZero() {
		s.log.first = time.Now()
	}
	s.log.last = time.Now()
	events := []*pbresource.WatchEvent{ev}
	if b := ev.GetBatch(); b != nil {
		// A batch (over gRPC) is counted as its events.
		events = b.Events
		s.log.batches++
	}
	for _, ev := range events {
		switch ev.Event.(type) {
		case *pbresource.WatchEvent_Upsert_:
			s.log.upserts++
		case *pbresource.WatchEvent_Delete_:
			s.log.deletes++
		case *pbresource.WatchEvent_EndOfSnapshot_:
			s.log.endOfSnapshot++
		case *pbresource.WatchEvent_NewSnapshot_:
			s.log.newSnap++
		case *pbresource.WatchEvent_Bookmark_:
			s.log.bookmarks++
		}
	}
	return ev, nil
}

// contents returns "name@version" of every Bar, sorted.
func contents(list []*pbresource.Resource) []string {
	out := make([]string, 0, len(list))
	for _, r := range list {
		out = append(out, r.Id.Name+"@"+r.Version)
	}
	sort.Strings(out)
	return out
}

// waitCacheMatches waits until the Manager's cache holds exactly the Bars
// the service holds.
func waitCacheMatches(t *testing.T, svc *resourcetest.Service, m *controller.Manager) {
	t.Helper()
	var want, got []string
	require.Eventually(t, func() bool {
		rsp, err := svc.Client.List(context.Background(), &pbresource.ListRequest{
			Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard}})
		require.NoError(t, err)
		cached, err := m.Cache().All(foo.BarV1Type)
		require.NoError(t, err)
		want, got = contents(rsp.Resources), contents(cached)
		return fmt.Sprint(want) == fmt.Sprint(got)
	}, 10*time.Second, 5*time.Millisecond, "cache %v, service %v", got, want)
}

// resumeCase primes a Manager's cache of 20 Bars, breaks its stream, makes
// 5 updates, 3 creates and 2 deletes, and waits until the cache is current
// again. It returns the client's log of the streams.
func resumeCase(t *testing.T, client *breakableClient, svc *resourcetest.Service) *breakableClient {
	t.Helper()
	var bars []*pbresource.Resource
	for i := range 20 {
		bars = append(bars, writeBar(t, svc.Client, fmt.Sprintf("bar-%02d", i), "v1", nil))
	}
	client.ResourceServiceClient = svc.Client
	m := newManager(t, client)
	m.MustRegister(controller.NewController("bars", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })))
	m.SetLeader(true)
	runManager(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.WaitPrimed(ctx))
	first, ok := client.stream(0)
	require.True(t, ok)
	require.Equal(t, 20, first.upserts)

	client.breakStreams()
	for i := range 5 {
		writeBar(t, svc.Client, bars[i].Id.Name, "v2", nil)
	}
	for i := range 3 {
		writeBar(t, svc.Client, fmt.Sprintf("new-%d", i), "v1", nil)
	}
	for _, b := range bars[18:] {
		_, err := svc.Client.Delete(context.Background(), &pbresource.DeleteRequest{Id: b.Id})
		require.NoError(t, err)
	}
	client.reopen()
	waitCacheMatches(t, svc, m)
	return client
}

// TestCacheResumesBrokenStream: a broken stream is re-opened from the
// cache's last version, and the server sends only what changed meanwhile.
func TestCacheResumesBrokenStream(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	client := resumeCase(t, &breakableClient{}, svc)
	second, ok := client.stream(1)
	require.True(t, ok, "the stream was re-opened")
	require.NotEmpty(t, second.since, "re-opened with since_version")
	require.Zero(t, second.endOfSnapshot, "a resumed stream has no snapshot")
	require.Zero(t, second.newSnap)
	require.LessOrEqual(t, second.upserts, 8, "only the changes: 5 updates and 3 creates")
	require.LessOrEqual(t, second.deletes, 2)
}

// TestCacheResumeTooOld: when the server no longer has the changes since
// the cache's version, it announces a new snapshot, and the cache is
// replaced by it (the deleted Bars are gone).
func TestCacheResumeTooOld(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes),
		resourcetest.WithBackendOptions(inmem.WithWatchLogEvents(4)))
	client := resumeCase(t, &breakableClient{}, svc)
	var last streamLog
	for i := 1; ; i++ {
		s, ok := client.stream(i)
		if !ok {
			break
		}
		last = s
	}
	require.NotEmpty(t, last.since, "re-opened with since_version")
	require.Equal(t, 1, last.newSnap, "the server said it could not resume")
	require.Equal(t, 1, last.endOfSnapshot)
}

// TestCacheResumeIgnored: a server that ignores since_version sends a
// snapshot without announcing it; the cache notices and replaces its
// content, so the Bars deleted while the stream was broken are gone.
func TestCacheResumeIgnored(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	client := resumeCase(t, &breakableClient{ignoreSince: true}, svc)
	second, ok := client.stream(1)
	require.True(t, ok, "the stream was re-opened")
	require.NotEmpty(t, second.since, "asked for since_version")
	require.Equal(t, 1, second.endOfSnapshot, "got a whole snapshot instead")
}
