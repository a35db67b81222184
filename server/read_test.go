package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// consistencySpy records the consistency of every backend Read.
type consistencySpy struct {
	storage.Backend
	mu   sync.Mutex
	seen []storage.ReadConsistency
}

func (s *consistencySpy) Read(ctx context.Context, c storage.ReadConsistency, id *pbresource.ID) (*pbresource.Resource, error) {
	s.mu.Lock()
	s.seen = append(s.seen, c)
	s.mu.Unlock()
	return s.Backend.Read(ctx, c, id)
}

func (s *consistencySpy) last() storage.ReadConsistency {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seen[len(s.seen)-1]
}

func TestRead_Consistency(t *testing.T) {
	spy := &consistencySpy{}
	env := newEnv(t, withBackendWrapper(func(b storage.Backend) storage.Backend { spy.Backend = b; return spy }))
	env.write(t, bar(t, "a", "x"))
	for name, client := range map[string]pbresource.ResourceServiceClient{
		"in-process": env.client,
		"grpc":       grpcClient(t, env),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			_, err := client.Read(ctx, &pbresource.ReadRequest{Id: barID("a")})
			require.NoError(t, err)
			require.Equal(t, storage.EventualConsistency, spy.last())

			strong := metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
			_, err = client.Read(strong, &pbresource.ReadRequest{Id: barID("a")})
			require.NoError(t, err)
			require.Equal(t, storage.StrongConsistency, spy.last())
		})
	}

	// Incoming metadata on the caller's context (e.g. a handler calling the
	// in-process client) is not mistaken for the caller's request.
	in := metadata.NewIncomingContext(testCtx(t), metadata.Pairs(resource.ConsistencyModeKey, resource.ConsistencyModeConsistent))
	_, err := env.client.Read(in, &pbresource.ReadRequest{Id: barID("a")})
	require.NoError(t, err)
	require.Equal(t, storage.EventualConsistency, spy.last())
}

func TestRead(t *testing.T) {
	env := newEnv(t)
	_, err := env.read(t, barID("a"))
	requireCode(t, err, codes.NotFound)

	stored := env.write(t, bar(t, "a", "x"))
	withUid := proto.Clone(stored.Id).(*pbresource.ID)
	require.True(t, proto.Equal(stored, env.mustRead(t, withUid)))

	withUid.Uid = resource.NewULID()
	_, err = env.read(t, withUid)
	requireCode(t, err, codes.NotFound)

	// Empty tenancy means the defaults.
	id := barID("a")
	id.Tenancy = nil
	require.Equal(t, stored.Version, env.mustRead(t, id).Version)
}

// The in-process client never lets the caller and the server share a
// message.
func TestInProcess_Isolation(t *testing.T) {
	env := newEnv(t)
	req := &pbresource.WriteRequest{Resource: bar(t, "a", "x")}
	req.Resource.Id.Tenancy = nil
	before := proto.Clone(req).(*pbresource.WriteRequest)
	out, err := env.client.Write(testCtx(t), req)
	require.NoError(t, err)
	require.True(t, proto.Equal(before, req), "the request is not modified")

	// Changing what was returned changes nothing stored.
	out.Resource.Id.Name = "changed"
	out.Resource.Data.Value[0] ^= 0xff
	read := env.mustRead(t, barID("a"))
	require.Equal(t, "a", read.Id.Name)
	require.Equal(t, "x", decodeBar(t, read).Baz)

	read.Metadata = map[string]string{"x": "y"}
	read.Id.Tenancy.Namespace = "zzz"
	again := env.mustRead(t, barID("a"))
	require.Empty(t, again.Metadata)
	require.Equal(t, "default", again.Id.Tenancy.Namespace)

	st := env.writeStatus(t, again.Id, "k", simpleStatus(again.Generation))
	st.Status["k"].Conditions[0].Type = "changed"
	require.Equal(t, "Accepted", env.mustRead(t, barID("a")).Status["k"].Conditions[0].Type)

	l, err := env.client.List(testCtx(t), &pbresource.ListRequest{Type: barID("a").Type})
	require.NoError(t, err)
	l.Resources[0].Version = "0"
	require.NotEqual(t, "0", env.mustRead(t, barID("a")).Version)
}

func TestInProcess_NilRequests(t *testing.T) {
	env := newEnv(t)
	ctx := testCtx(t)
	_, err := env.client.Read(ctx, nil)
	requireCode(t, err, codes.InvalidArgument)
	_, err = env.client.Write(ctx, nil)
	requireCode(t, err, codes.InvalidArgument)
	_, err = env.client.WriteStatus(ctx, nil)
	requireCode(t, err, codes.InvalidArgument)
	_, err = env.client.Delete(ctx, nil)
	requireCode(t, err, codes.InvalidArgument)
	_, err = env.client.List(ctx, nil)
	requireCode(t, err, codes.InvalidArgument)
	_, err = env.client.ListByOwner(ctx, nil)
	requireCode(t, err, codes.InvalidArgument)
	_, err = env.client.MutateAndValidate(ctx, nil)
	requireCode(t, err, codes.InvalidArgument)
}

func TestStorageErrors(t *testing.T) {
	env := newEnv(t, withBackendWrapper(func(b storage.Backend) storage.Backend { return failingBackend{b} }))
	_, err := env.read(t, barID("a"))
	requireCode(t, err, codes.Unavailable)
	_, err = env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: bar(t, "a", "x")})
	requireCode(t, err, codes.Unavailable)
	_, err = env.client.List(testCtx(t), &pbresource.ListRequest{Type: barID("a").Type})
	requireCode(t, err, codes.Internal, "disk on fire")
}

type failingBackend struct{ storage.Backend }

func (failingBackend) Read(context.Context, storage.ReadConsistency, *pbresource.ID) (*pbresource.Resource, error) {
	return nil, storage.ErrInconsistent
}

func (failingBackend) List(context.Context, storage.ReadConsistency, storage.UnversionedType, *pbresource.Tenancy, string) ([]*pbresource.Resource, error) {
	return nil, errors.New("disk on fire")
}

// casLoser loses every compare-and-swap, as if another writer always got
// there first.
type casLoser struct{ storage.Backend }

func (casLoser) WriteCAS(context.Context, *pbresource.Resource) (*pbresource.Resource, error) {
	return nil, storage.ErrCASFailure
}

func (casLoser) DeleteCAS(context.Context, *pbresource.ID, string, ...storage.DeleteOption) error {
	return storage.ErrCASFailure
}

func TestBlanketWrites_GiveUpWithAborted(t *testing.T) {
	var inner storage.Backend
	env := newEnv(t, withBackendWrapper(func(b storage.Backend) storage.Backend { inner = b; return casLoser{b} }))
	stored, err := NewInProcessClient(New(Config{Backend: inner, Registry: env.registry})).
		Write(testCtx(t), &pbresource.WriteRequest{Resource: bar(t, "a", "x")})
	require.NoError(t, err)

	_, err = env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: bar(t, "a", "y")})
	requireCode(t, err, codes.Aborted, "attempts")
	_, err = env.client.WriteStatus(testCtx(t), &pbresource.WriteStatusRequest{
		Id: stored.Resource.Id, Key: "k", Status: simpleStatus(stored.Resource.Generation),
	})
	requireCode(t, err, codes.Aborted, "attempts")
	requireCode(t, env.delete(t, barID("a"), ""), codes.Aborted, "attempts")

	// Versioned writes do not retry: one lost race is Aborted at once.
	res := bar(t, "a", "y")
	res.Version = stored.Resource.Version
	_, err = env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: res})
	requireCode(t, err, codes.Aborted, "changed since it was read")
}

// TestOutcomeUnknownIsUnavailable: a write whose outcome the store could not
// learn is Unavailable with a message that says so and how to check, even
// when the caller's deadline passed meanwhile (which would otherwise be
// DeadlineExceeded, a code that says nothing of the write).
func TestOutcomeUnknownIsUnavailable(t *testing.T) {
	for _, cause := range []error{errors.New("etcd: request timed out"), context.DeadlineExceeded} {
		err := storageError(fmt.Errorf("etcd: %w: %w", storage.ErrOutcomeUnknown, cause))
		requireCode(t, err, codes.Unavailable, "outcome unknown", "read the resource and compare its version")
	}
	env := newEnv(t, withBackendWrapper(func(b storage.Backend) storage.Backend { return unknownOutcome{b} }))
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: bar(t, "a", "x")})
	requireCode(t, err, codes.Unavailable, "outcome unknown")
}

// unknownOutcome never learns whether its writes landed.
type unknownOutcome struct{ storage.Backend }

func (unknownOutcome) WriteCAS(context.Context, *pbresource.Resource) (*pbresource.Resource, error) {
	return nil, fmt.Errorf("%w: %w", storage.ErrOutcomeUnknown, context.DeadlineExceeded)
}
