package dial_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/dial"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/testcerts"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

// cluster is several ResourceServices on loopback listeners sharing one
// in-memory backend, as several hosts share one etcd.
type cluster struct {
	servers []*replica
	// hold, when set, is the method whose next call is held in its
	// handler until the caller's server stops; held receives the index of
	// the server holding it.
	mu   sync.Mutex
	hold string
	held chan int
}

// replica is one server of a cluster.
type replica struct {
	addr    string
	gs      *grpc.Server
	calls   sync.Map // full method name -> *atomic.Int64
	stopped chan struct{}
	stop    func()
}

func (r *replica) count(method string) int64 {
	n, _ := r.calls.LoadOrStore("/hashicorp.consul.resource.ResourceService/"+method, new(atomic.Int64))
	return n.(*atomic.Int64).Load()
}

// newCluster starts n servers over one backend, over TLS when creds is
// set.
func newCluster(t *testing.T, n int, creds credentials.TransportCredentials) *cluster {
	t.Helper()
	backend := inmem.New()
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	c := &cluster{}
	for i := range n {
		c.servers = append(c.servers, c.start(t, i, backend, reg, creds))
	}
	return c
}

func (c *cluster) start(t *testing.T, i int, backend storage.Backend, reg resource.Registry, creds credentials.TransportCredentials) *replica {
	t.Helper()
	r := &replica{stopped: make(chan struct{})}
	svc := server.New(server.Config{Backend: backend, Registry: reg})
	opts := append(svc.ServerOptions(),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			r.counter(info.FullMethod).Add(1)
			if held := c.take(info.FullMethod); held != nil {
				held <- i
				<-r.stopped
				return nil, status.Error(codes.Unavailable, "held until the server stopped")
			}
			return handler(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			r.counter(info.FullMethod).Add(1)
			return handler(srv, ss)
		}))
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	r.gs = grpc.NewServer(opts...)
	svc.Register(r.gs)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r.addr = lis.Addr().String()
	go func() { _ = r.gs.Serve(lis) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			close(r.stopped)
			r.gs.Stop()
		})
	}
	t.Cleanup(r.stop)
	return r
}

func (r *replica) counter(method string) *atomic.Int64 {
	n, _ := r.calls.LoadOrStore(method, new(atomic.Int64))
	return n.(*atomic.Int64)
}

// holdNext makes the next call of method wait in its server's handler.
func (c *cluster) holdNext(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold, c.held = "/hashicorp.consul.resource.ResourceService/"+method, make(chan int, 1)
}

// take returns the channel to report on if this call of method is to be
// held, else nil.
func (c *cluster) take(method string) chan<- int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold != method {
		return nil
	}
	c.hold = ""
	return c.held
}

func (c *cluster) addrs() string {
	var list []string
	for _, r := range c.servers {
		list = append(list, r.addr)
	}
	return strings.Join(list, ",")
}

func zip(t *testing.T, name string) *pbresource.Resource {
	t.Helper()
	data, err := anypb.New(&pbfoov1.Zip{Zap: name})
	require.NoError(t, err)
	return &pbresource.Resource{Id: &pbresource.ID{Type: foo.ZipType, Name: name}, Data: data}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A read in flight on a server that stops is answered by another.
func TestDialRetriesReadOnAnotherServer(t *testing.T) {
	c := newCluster(t, 2, nil)
	conn, err := dial.Dial(c.addrs(), dial.WithInsecure())
	require.NoError(t, err)
	defer conn.Close()
	client := pbresource.NewResourceServiceClient(conn)
	ctx := ctxFor(t)
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: zip(t, "z")})
	require.NoError(t, err)

	c.holdNext("Read")
	done := make(chan error, 1)
	go func() {
		_, err := client.Read(ctx, &pbresource.ReadRequest{Id: zip(t, "z").Id})
		done <- err
	}()
	i := <-c.held
	c.servers[i].stop()
	require.NoError(t, <-done, "the read is retried on the server still running")
	require.EqualValues(t, 1, c.servers[1-i].count("Read"))

	for range 3 {
		_, err := client.Read(ctx, &pbresource.ReadRequest{Id: zip(t, "z").Id})
		require.NoError(t, err)
	}
}

// A write in flight on a server that stops may have been applied: it is
// not sent again, and the caller gets Unavailable.
func TestDialDoesNotRetryWriteOfUnknownOutcome(t *testing.T) {
	c := newCluster(t, 2, nil)
	conn, err := dial.Dial(c.addrs(), dial.WithInsecure())
	require.NoError(t, err)
	defer conn.Close()
	client := pbresource.NewResourceServiceClient(conn)
	ctx := ctxFor(t)

	c.holdNext("Write")
	done := make(chan error, 1)
	go func() {
		_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: zip(t, "z")})
		done <- err
	}()
	i := <-c.held
	c.servers[i].stop()
	require.Equal(t, codes.Unavailable, status.Code(<-done))
	require.Zero(t, c.servers[1-i].count("Write"), "the write is not sent again")

	// A write sent as a server crashes may be lost or applied, so it is
	// not retried; a read is, and connects to the other server.
	_, err = client.Read(ctx, &pbresource.ReadRequest{Id: zip(t, "z").Id})
	require.Equal(t, codes.NotFound, status.Code(err))
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: zip(t, "z")})
	require.NoError(t, err, "the next write goes to the server still running")
}

// A client given stopped and silent servers among others connects to
// one that answers, without waiting for the silent ones' connect timeout.
func TestDialSkipsServersThatDoNotAnswer(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.servers[0].stop()
	// A silent server accepts connections and never speaks.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
		}
	}()
	addrs := c.addrs() + "," + silent.Addr().String()
	// The list is shuffled for each connection: a few connections make
	// it likely that some try a stopped or silent server first.
	for range 5 {
		conn, err := dial.Dial(addrs, dial.WithInsecure())
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = pbresource.NewResourceServiceClient(conn).Write(ctx, &pbresource.WriteRequest{Resource: zip(t, "z")})
		cancel()
		require.NoError(t, err)
		require.NoError(t, conn.Close())
	}
}

// Each server's certificate is checked against its own address.
func TestDialSeveralServersOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "ca")
	crt, key := ca.WriteLeaf(t, dir, "server")
	sc, err := certs.ServerConfig(certs.Files{Cert: crt, Key: key})
	require.NoError(t, err)
	c := newCluster(t, 2, credentials.NewTLS(sc))
	// The test certificate names localhost and 127.0.0.1.
	addrs := strings.Replace(c.servers[0].addr, "127.0.0.1", "localhost", 1) + "," + c.servers[1].addr
	conn, err := dial.Dial(addrs, dial.WithTLS(certs.Files{CA: ca.WriteCA(t, dir, "ca")}))
	require.NoError(t, err)
	defer conn.Close()
	client := pbresource.NewResourceServiceClient(conn)
	ctx := ctxFor(t)
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: zip(t, "z")})
	require.NoError(t, err)
	for _, r := range c.servers {
		if r.count("Write") > 0 {
			r.stop()
		}
	}
	_, err = client.Read(ctx, &pbresource.ReadRequest{Id: zip(t, "z").Id})
	require.NoError(t, err, "the other server's certificate is accepted too")
}

// A Manager's cache keeps watching when its server stops: the watch is
// re-opened on another server.
func TestDialManagerRewatchesOnAnotherServer(t *testing.T) {
	c := newCluster(t, 2, nil)
	conn, err := dial.Dial(c.addrs(), dial.WithInsecure())
	require.NoError(t, err)
	defer conn.Close()
	client := pbresource.NewResourceServiceClient(conn)
	m, err := controller.NewManager(client, nil, controller.WithWatchRetry(time.Millisecond, 20*time.Millisecond))
	require.NoError(t, err)
	m.MustRegister(controller.NewController("zip", foo.ZipType).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })))
	m.SetLeader(true)
	ctx, cancel := context.WithCancel(ctxFor(t))
	ran := make(chan error, 1)
	go func() { ran <- m.Run(ctx) }()
	defer func() { cancel(); require.NoError(t, <-ran) }()
	require.NoError(t, m.WaitPrimed(ctx))

	for _, r := range c.servers {
		if r.count("WatchList") > 0 {
			r.stop()
		}
	}
	// A write sent as a server crashes is not retried (see
	// TestDialDoesNotRetryWriteOfUnknownOutcome); a read is, and connects
	// to the other server.
	_, err = client.Read(ctx, &pbresource.ReadRequest{Id: zip(t, "after").Id})
	require.Equal(t, codes.NotFound, status.Code(err))
	wr, err := client.Write(ctx, &pbresource.WriteRequest{Resource: zip(t, "after")})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		d, err := cache.GetDecodedByIDReadOnly[*pbfoov1.Zip](m.Cache(), wr.Resource.Id)
		require.NoError(t, err)
		return d != nil
	}, 10*time.Second, 5*time.Millisecond, "the cache sees a write made after its server stopped")
}

func TestSplitAddrs(t *testing.T) {
	got, err := dial.SplitAddrs(" a:1 ,b:2")
	require.NoError(t, err)
	require.Equal(t, []string{"a:1", "b:2"}, got)
	for _, bad := range []string{"", "a:1,", "a:1,,b:2", " "} {
		_, err := dial.SplitAddrs(bad)
		require.ErrorContains(t, err, "empty server address", "%q", bad)
	}
	_, err = dial.Dial("a:1,,b:2", dial.WithInsecure())
	require.ErrorContains(t, err, "empty server address")
}
