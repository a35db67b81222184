package controller_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
)

// serveGRPC serves register's services over an in-memory listener and
// returns a client connection that counts the WatchList calls made with a
// forced codec (the cache watcher's compact decoding).
func serveGRPC(t *testing.T, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) (pbresource.ResourceServiceClient, *atomic.Int64) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(opts...)
	register(gs)
	go func() { _ = gs.Serve(lis) }()
	var forced atomic.Int64
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			for _, o := range opts {
				if _, ok := o.(grpc.ForceCodecV2CallOption); ok && desc.StreamName == "WatchList" {
					forced.Add(1)
				}
			}
			return streamer(ctx, desc, cc, method, opts...)
		}),
	)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
	})
	return pbresource.NewResourceServiceClient(conn), &forced
}

// cachedBar returns the cache's own resource for id (not a copy), or nil.
func cachedBar(t *testing.T, m *controller.Manager, id *pbresource.ID) *pbresource.Resource {
	t.Helper()
	d, err := cache.GetDecodedByIDReadOnly[*pbfoov1.Bar](m.Cache(), id)
	require.NoError(t, err)
	if d == nil {
		return nil
	}
	return d.Resource
}

func startBarManager(t *testing.T, client pbresource.ResourceServiceClient) *controller.Manager {
	t.Helper()
	m := newManager(t, client)
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })))
	m.SetLeader(true)
	runManager(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, m.WaitPrimed(ctx))
	return m
}

// TestRemoteCacheEqualsServer checks that a Manager whose client is a gRPC
// connection caches exactly the server's resources (owner, metadata and
// statuses included), both from the snapshot and from later changes.
func TestRemoteCacheEqualsServer(t *testing.T) {
	svc := startService(t)
	writer := svc.Client
	owner := writeBar(t, writer, "owner", "o", nil)
	for i := range 20 {
		data, err := anypb.New(&pbfoov1.Bar{Baz: fmt.Sprint("baz-", i), Qux: zipID("z")})
		require.NoError(t, err)
		res := &pbresource.Resource{Id: barID(fmt.Sprint("bar-", i)), Data: data}
		if i%2 == 0 {
			res.Owner = owner.Id
		}
		if i%3 == 0 {
			res.Metadata = map[string]string{"team": "a", "n": fmt.Sprint(i)}
		}
		rsp, err := writer.Write(context.Background(), &pbresource.WriteRequest{Resource: res})
		require.NoError(t, err)
		if i%4 == 0 {
			writeStatus(t, writer, rsp.Resource, "key-a")
			writeStatus(t, writer, readBar(t, writer, rsp.Resource.Id), "key-b")
		}
	}

	client, forced := serveGRPC(t, svc.Server.Register, svc.Server.ServerOptions()...)
	m := startBarManager(t, client)
	require.Positive(t, forced.Load(), "the cache watcher did not force its codec on WatchList")
	requireCacheEqualsServer(t, m, writer)

	// Changes after the snapshot: a new resource, a status, a delete.
	writeBar(t, writer, "late", "l", nil)
	writeStatus(t, writer, readBar(t, writer, barID("bar-1")), "key-c")
	_, err := writer.Delete(context.Background(), &pbresource.DeleteRequest{Id: barID("bar-2")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return cacheEqualsServer(t, m, writer) == "" }, 10*time.Second, 5*time.Millisecond,
		"the remote cache did not catch up with the server")
}

func readBar(t *testing.T, client pbresource.ResourceServiceClient, id *pbresource.ID) *pbresource.Resource {
	t.Helper()
	rsp, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: id})
	require.NoError(t, err)
	return rsp.Resource
}

func writeStatus(t *testing.T, client pbresource.ResourceServiceClient, res *pbresource.Resource, key string) {
	t.Helper()
	_, err := client.WriteStatus(context.Background(), &pbresource.WriteStatusRequest{
		Id: res.Id, Version: res.Version, Key: key,
		Status: &pbresource.Status{
			ObservedGeneration: res.Generation,
			Conditions: []*pbresource.Condition{
				{Type: "Accepted", State: pbresource.Condition_STATE_TRUE, Reason: "OK"},
				{Type: "Ref", State: pbresource.Condition_STATE_FALSE, Message: "m",
					Resource: &pbresource.Reference{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "z", Section: "s"}},
			},
		},
	})
	require.NoError(t, err)
}

func requireCacheEqualsServer(t *testing.T, m *controller.Manager, server pbresource.ResourceServiceClient) {
	t.Helper()
	if diff := cacheEqualsServer(t, m, server); diff != "" {
		t.Fatal(diff)
	}
}

// cacheEqualsServer returns what differs between m's cached bars and the
// server's, or "".
func cacheEqualsServer(t *testing.T, m *controller.Manager, server pbresource.ResourceServiceClient) string {
	t.Helper()
	rsp, err := server.List(context.Background(), &pbresource.ListRequest{
		Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"},
	})
	require.NoError(t, err)
	all, err := m.Cache().All(foo.BarV1Type)
	require.NoError(t, err)
	if n := len(all); n != len(rsp.Resources) {
		return fmt.Sprintf("the cache holds %d bars, the server %d", n, len(rsp.Resources))
	}
	for _, want := range rsp.Resources {
		got := cachedBar(t, m, want.Id)
		if !proto.Equal(got, want) {
			return fmt.Sprintf("cached %v, the server has %v", got, want)
		}
	}
	return ""
}

// oddWatchServer is a ResourceService whose WatchList sends fixed
// resources, then EndOfSnapshot, then waits.
type oddWatchServer struct {
	pbresource.UnimplementedResourceServiceServer
	resources []*pbresource.Resource
}

func (s *oddWatchServer) WatchList(req *pbresource.WatchListRequest, stream grpc.ServerStreamingServer[pbresource.WatchEvent]) error {
	for _, res := range s.resources {
		if err := stream.Send(&pbresource.WatchEvent{Event: &pbresource.WatchEvent_Upsert_{Upsert: &pbresource.WatchEvent_Upsert{Resource: res}}}); err != nil {
			return err
		}
	}
	if err := stream.Send(&pbresource.WatchEvent{Event: &pbresource.WatchEvent_EndOfSnapshot_{EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{}}}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

// TestRemoteCacheKeepsOddFields checks that resources the compact decoder
// leaves to the generic one (unknown fields, a field sent twice, a field of
// the wrong wire type) are cached as the generic decoder decodes them.
func TestRemoteCacheKeepsOddFields(t *testing.T) {
	withUnknown := func(m proto.Message, raw []byte) {
		r := m.ProtoReflect()
		r.SetUnknown(append(r.GetUnknown(), raw...))
	}
	bar := func(name string) *pbresource.Resource {
		data, err := anypb.New(&pbfoov1.Bar{Baz: name})
		require.NoError(t, err)
		id := barID(name)
		id.Uid = "uid-" + name
		return &pbresource.Resource{Id: id, Version: "1", Generation: "g", Data: data,
			Metadata: map[string]string{"k": "v"}, Owner: barID("owner")}
	}
	plain := bar("plain")
	unknown := bar("unknown")
	withUnknown(unknown, protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 7))
	withUnknown(unknown.Id, protowire.AppendVarint(protowire.AppendTag(nil, 98, protowire.VarintType), 8))
	twice := bar("twice") // the Owner again, which merges: its Name changes
	withUnknown(twice, protowire.AppendBytes(protowire.AppendTag(nil, 2, protowire.BytesType), []byte{0x12, 0x01, 'x'}))
	wrongType := bar("wrong-type") // Version as a varint: kept as an unknown field
	withUnknown(wrongType, protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 1))
	sent := []*pbresource.Resource{plain, unknown, twice, wrongType}

	srv := &oddWatchServer{resources: sent}
	client, forced := serveGRPC(t, func(gs grpc.ServiceRegistrar) { pbresource.RegisterResourceServiceServer(gs, srv) })
	m := startBarManager(t, client)
	require.Positive(t, forced.Load(), "the cache watcher did not force its codec on WatchList")
	for _, res := range sent {
		b, err := proto.Marshal(res)
		require.NoError(t, err)
		want := new(pbresource.Resource)
		require.NoError(t, proto.Unmarshal(b, want))
		got := cachedBar(t, m, res.Id)
		require.True(t, proto.Equal(got, want), "%s: cached %v, want %v", res.Id.Name, got, want)
	}
	require.Equal(t, "x", cachedBar(t, m, twice.Id).Owner.Name, "the repeated Owner did not merge")
	require.NotEmpty(t, cachedBar(t, m, unknown.Id).ProtoReflect().GetUnknown(), "the unknown field was dropped")
}
