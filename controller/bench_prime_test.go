package controller_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
)

// BenchmarkPrime times priming a remote Manager's cache (loopback gRPC) of
// 10,000 resources and counts the bytes it received (proto.Size of the
// WatchList events and List responses), from Loom (snapshots with a
// version) and from a server whose snapshots carry none, as Consul's, so
// that the cache confirms each with a List (unversioned).
func BenchmarkPrime(b *testing.B) {
	for _, mode := range []string{"loom", "unversioned"} {
		b.Run(mode, func(b *testing.B) {
			names := widgetNames(10_000)
			env := newBenchEnv(b, true)
			defer env.stop()
			ctx := context.Background()
			for _, w := range widgetWrites(b, names) {
				if _, err := env.writer.Write(ctx, w); err != nil {
					b.Fatal(err)
				}
			}
			client := &sizeClient{ResourceServiceClient: env.ctrl, unversioned: mode == "unversioned"}
			var elapsed time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				rm := startManager(b, client, reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil }))
				rm.waitPrimed(b)
				elapsed += time.Since(start)
				b.StopTimer()
				rm.stop(b)
				b.StartTimer()
			}
			b.ReportMetric(float64(elapsed.Milliseconds())/float64(b.N), "ms/prime")
			b.ReportMetric(float64(client.bytes.Load())/float64(b.N), "bytes/prime")
		})
	}
}

// sizeClient counts the bytes of WatchList events and List responses and,
// when unversioned, strips the version from EndOfSnapshot as Consul sends it.
type sizeClient struct {
	pbresource.ResourceServiceClient
	unversioned bool
	bytes       atomic.Int64
}

func (c *sizeClient) List(ctx context.Context, req *pbresource.ListRequest, opts ...grpc.CallOption) (*pbresource.ListResponse, error) {
	rsp, err := c.ResourceServiceClient.List(ctx, req, opts...)
	if err == nil {
		c.bytes.Add(int64(proto.Size(rsp)))
	}
	return rsp, err
}

func (c *sizeClient) WatchList(ctx context.Context, req *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	if c.unversioned {
		// Nor does such a server send batches of events.
		req = &pbresource.WatchListRequest{Type: req.Type, Tenancy: req.Tenancy, NamePrefix: req.NamePrefix,
			SinceVersion: req.SinceVersion, Bookmarks: req.Bookmarks}
	}
	s, err := c.ResourceServiceClient.WatchList(ctx, req, opts...)
	if err != nil {
		return nil, err
	}
	return &sizeStream{ServerStreamingClient: s, c: c}, nil
}

type sizeStream struct {
	grpc.ServerStreamingClient[pbresource.WatchEvent]
	c *sizeClient
}

func (s *sizeStream) Recv() (*pbresource.WatchEvent, error) {
	ev, err := s.ServerStreamingClient.Recv()
	if err != nil {
		return nil, err
	}
	s.c.bytes.Add(int64(proto.Size(ev)))
	if s.c.unversioned && ev.GetEndOfSnapshot() != nil {
		ev = &pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{}}}
	}
	return ev, nil
}
