package controller

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
)

// scriptedClient answers WatchList with a fixed list of events, then ends
// the stream.
type scriptedClient struct {
	pbresource.ResourceServiceClient
	events []*pbresource.WatchEvent
}

func (c *scriptedClient) WatchList(ctx context.Context, _ *pbresource.WatchListRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	return &scriptedStream{ctx: ctx, events: c.events}, nil
}

type scriptedStream struct {
	grpc.ClientStream
	ctx    context.Context
	events []*pbresource.WatchEvent
}

func (s *scriptedStream) Recv() (*pbresource.WatchEvent, error) {
	if len(s.events) == 0 {
		<-s.ctx.Done()
		return nil, io.EOF
	}
	ev := s.events[0]
	s.events = s.events[1:]
	return ev, nil
}

// The changes a snapshot brings are marked as such (their reconciles go in
// at low priority); the live changes after it are not.
func TestSnapshotEventsAreMarked(t *testing.T) {
	typ := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"}
	res := func(name, version string) *pbresource.Resource {
		return &pbresource.Resource{Version: version, Id: &pbresource.ID{Type: typ, Name: name,
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}}}
	}
	upsert := func(r *pbresource.Resource) *pbresource.WatchEvent {
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: r}}}
	}
	c := cache.New()
	require.NoError(t, c.AddType(typ))
	w := &cacheWatcher{
		Client: &scriptedClient{events: []*pbresource.WatchEvent{
			upsert(res("a", "1")),
			upsert(res("b", "2")),
			{Event: &pbresource.WatchEvent_EndOfSnapshot_{EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{Version: "2"}}},
			upsert(res("c", "3")),
		}},
		Cache:  c,
		Probe:  newServerProbe(),
		Health: newWatchHealth(nil),
	}
	events := make(chan cache.Event, 10)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = w.Run(ctx, typ, func(ev cache.Event) { events <- ev }, nil) }()
	snapshot := map[string]bool{}
	for range 3 {
		select {
		case ev := <-events:
			snapshot[ev.Resource.Id.Name] = ev.Snapshot
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
	}
	require.Equal(t, map[string]bool{"a": true, "b": true, "c": false}, snapshot)
}
