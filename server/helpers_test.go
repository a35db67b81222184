package server

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

// testEnv is a server over a fresh in-memory backend with the example types
// registered, and an in-process client to it.
type testEnv struct {
	backend  *inmem.Backend
	registry *resource.TypeRegistry
	server   *Server
	client   pbresource.ResourceServiceClient
}

type envConfig struct {
	acl         func(context.Context) (resource.Authorizer, error)
	watchBuffer int
	wrap        func(storage.Backend) storage.Backend
	bookmark    time.Duration
	logger      hclog.Logger
}

type envOption func(*envConfig)

func withACL(resolver func(context.Context) (resource.Authorizer, error)) envOption {
	return func(c *envConfig) { c.acl = resolver }
}

func withWatchBuffer(n int) envOption {
	return func(c *envConfig) { c.watchBuffer = n }
}

func withBookmarkInterval(d time.Duration) envOption {
	return func(c *envConfig) { c.bookmark = d }
}

func withLogger(l hclog.Logger) envOption {
	return func(c *envConfig) { c.logger = l }
}

func withBackendWrapper(wrap func(storage.Backend) storage.Backend) envOption {
	return func(c *envConfig) { c.wrap = wrap }
}

func newEnv(t testing.TB, opts ...envOption) *testEnv {
	t.Helper()
	var ec envConfig
	for _, o := range opts {
		o(&ec)
	}
	var bopts []inmem.Option
	if ec.watchBuffer > 0 {
		bopts = append(bopts, inmem.WithWatchBufferSize(ec.watchBuffer))
	}
	b := inmem.New(bopts...)
	var backend storage.Backend = b
	if ec.wrap != nil {
		backend = ec.wrap(b)
	}
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	s := New(Config{Backend: backend, Registry: reg, ACLResolver: ec.acl, WatchBookmarkInterval: ec.bookmark, Logger: ec.logger})
	return &testEnv{backend: b, registry: reg, server: s, client: NewInProcessClient(s)}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustAny(t testing.TB, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	require.NoError(t, err)
	return a
}

func barID(name string) *pbresource.ID {
	return &pbresource.ID{
		Type:    proto.Clone(foo.BarV1Type).(*pbresource.Type),
		Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		Name:    name,
	}
}

func barV2ID(name string) *pbresource.ID {
	id := barID(name)
	id.Type.GroupVersion = "v2"
	return id
}

func zipID(name string) *pbresource.ID {
	return &pbresource.ID{
		Type:    proto.Clone(foo.ZipType).(*pbresource.Type),
		Tenancy: &pbresource.Tenancy{Partition: "default"},
		Name:    name,
	}
}

func quxID(name string) *pbresource.ID {
	return &pbresource.ID{
		Type:    proto.Clone(foo.QuxType).(*pbresource.Type),
		Tenancy: &pbresource.Tenancy{},
		Name:    name,
	}
}

func bar(t testing.TB, name, baz string) *pbresource.Resource {
	return &pbresource.Resource{Id: barID(name), Data: mustAny(t, &pbfoov1.Bar{Baz: baz})}
}

func barV2(t testing.TB, name, baz string) *pbresource.Resource {
	return &pbresource.Resource{Id: barV2ID(name), Data: mustAny(t, &pbfoov2.Bar{Baz: baz})}
}

func zip(t testing.TB, name string) *pbresource.Resource {
	return &pbresource.Resource{Id: zipID(name), Data: mustAny(t, &pbfoov1.Zip{Zap: "z"})}
}

func qux(t testing.TB, name string) *pbresource.Resource {
	return &pbresource.Resource{Id: quxID(name), Data: mustAny(t, &pbfoov1.Qux{Note: "n"})}
}

func (e *testEnv) write(t testing.TB, res *pbresource.Resource) *pbresource.Resource {
	t.Helper()
	out, err := e.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: res})
	require.NoError(t, err)
	return out.Resource
}

func (e *testEnv) read(t testing.TB, id *pbresource.ID) (*pbresource.Resource, error) {
	t.Helper()
	out, err := e.client.Read(testCtx(t), &pbresource.ReadRequest{Id: id})
	if err != nil {
		return nil, err
	}
	return out.Resource, nil
}

func (e *testEnv) mustRead(t testing.TB, id *pbresource.ID) *pbresource.Resource {
	t.Helper()
	res, err := e.read(t, id)
	require.NoError(t, err)
	return res
}

func (e *testEnv) writeStatus(t testing.TB, id *pbresource.ID, key string, st *pbresource.Status) *pbresource.Resource {
	t.Helper()
	out, err := e.client.WriteStatus(testCtx(t), &pbresource.WriteStatusRequest{Id: id, Key: key, Status: st})
	require.NoError(t, err)
	return out.Resource
}

func (e *testEnv) delete(t testing.TB, id *pbresource.ID, version string) error {
	t.Helper()
	_, err := e.client.Delete(testCtx(t), &pbresource.DeleteRequest{Id: id, Version: version})
	return err
}

// requireCode asserts err is a status with code and, when given, that its
// message contains every one of contains.
func requireCode(t testing.TB, err error, code codes.Code, contains ...string) {
	t.Helper()
	require.Error(t, err)
	st, ok := status.FromError(err)
	require.True(t, ok, "not a status error: %v", err)
	require.Equal(t, code, st.Code(), "message: %s", st.Message())
	for _, c := range contains {
		require.Contains(t, st.Message(), c)
	}
}

func simpleStatus(gen string) *pbresource.Status {
	return &pbresource.Status{
		ObservedGeneration: gen,
		Conditions:         []*pbresource.Condition{{Type: "Accepted", State: pbresource.Condition_STATE_TRUE}},
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, msg)
}
