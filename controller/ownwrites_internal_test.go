package controller

import (
	"context"
	"testing"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// cannedClient answers every write with version (or err).
type cannedClient struct {
	pbresource.ResourceServiceClient
	version string
	err     error
}

func (c *cannedClient) Write(context.Context, *pbresource.WriteRequest, ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	if c.err != nil {
		return nil, c.err
	}
	return &pbresource.WriteResponse{Resource: &pbresource.Resource{Version: c.version}}, nil
}

func (c *cannedClient) WriteStatus(context.Context, *pbresource.WriteStatusRequest, ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	if c.err != nil {
		return nil, c.err
	}
	return &pbresource.WriteStatusResponse{Resource: &pbresource.Resource{Version: c.version}}, nil
}

func (c *cannedClient) Delete(context.Context, *pbresource.DeleteRequest, ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	return &pbresource.DeleteResponse{}, c.err
}

// TestWriteRecorder: per type (any GroupVersion) the newest version
// written; versions that are not numbers, types the cache does not hold
// and Deletes are not waited for; a conflict is an Aborted write that the
// reconcile fails with; nothing is noted while the recorder is closed.
func TestWriteRecorder(t *testing.T) {
	ctx := context.Background()
	a1 := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "A"}
	a2 := &pbresource.Type{Group: "g", GroupVersion: "v2", Kind: "A"}
	b := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "B"}
	c := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "C"}
	notCached := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "D"}
	cached := cache.New()
	for _, typ := range []*pbresource.Type{a1, b, c} {
		require.NoError(t, cached.AddType(typ))
	}
	appliedA, err := cached.Applied(a1)
	require.NoError(t, err)
	appliedB, err := cached.Applied(b)
	require.NoError(t, err)
	canned := &cannedClient{}
	var r writeRecorder
	r.init(canned, cached)
	write := func(typ *pbresource.Type, version string) {
		canned.version = version
		_, err := r.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: &pbresource.ID{Type: typ}}})
		require.NoError(t, err)
	}
	writeStatus := func(typ *pbresource.Type, version string) {
		canned.version = version
		_, err := r.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: &pbresource.ID{Type: typ}})
		require.NoError(t, err)
	}

	write(a1, "5") // closed: not noted
	r.open()
	write(a1, "7")
	writeStatus(b, "9")
	writeStatus(a2, "8")
	write(a1, "6")
	write(c, "x") // not a number
	write(notCached, "11")
	canned.version = "10"
	_, err = r.Delete(ctx, &pbresource.DeleteRequest{Id: &pbresource.ID{Type: c}})
	require.NoError(t, err)
	assert.Equal(t, []writtenType{{typ: a1, applied: appliedA, version: 8}, {typ: b, applied: appliedB, version: 9}}, r.close())
	write(b, "20") // closed again
	assert.Len(t, r.types, 2)

	aborted := status.Error(codes.Aborted, "version mismatch")
	r.open()
	assert.Empty(t, r.types)
	assert.False(t, r.conflicted(aborted), "no write was refused")
	canned.err = status.Error(codes.InvalidArgument, "bad")
	_, _ = r.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: &pbresource.ID{Type: a1}}})
	assert.False(t, r.conflicted(aborted), "refused, but not as a conflict")
	canned.err = aborted
	_, _ = r.Delete(ctx, &pbresource.DeleteRequest{Id: &pbresource.ID{Type: a1}})
	r.close()
	assert.True(t, r.conflicted(aborted))
	assert.True(t, r.conflicted(wrapErr{aborted}), "wrapped")
	assert.False(t, r.conflicted(status.Error(codes.Unavailable, "down")), "the reconcile failed for another reason")
	r.open()
	assert.False(t, r.conflicted(aborted), "a new reconcile starts without")
}

type wrapErr struct{ err error }

func (w wrapErr) Error() string { return "wrapped: " + w.err.Error() }
func (w wrapErr) Unwrap() error { return w.err }
