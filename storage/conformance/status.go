package conformance

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// testWriteStatusCAS: for a storage.StatusWriter (skipped for others), a
// status write stores the resource it was given with the status copied
// under its key, at a new version, sends it on watches, leaves the resource
// it was given alone, and refuses a resource that is not the stored one (an
// older version, a copy, a deleted one).
func (s *suite) testWriteStatusCAS(t *testing.T) {
	b := s.newBackend(t)
	sw, ok := b.(storage.StatusWriter)
	if !ok {
		t.Skip("the backend does not implement storage.StatusWriter")
	}
	ctx := s.ctx(t)
	in := newDefault("status")
	in.Status = map[string]*pbresource.Status{"other": {ObservedGeneration: in.Generation}}
	stored := write(t, b, in)
	w, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	next(t, ctx, w) // the snapshot's upsert
	requireEndOfSnapshot(t, next(t, ctx, w))

	st := &pbresource.Status{ObservedGeneration: stored.Generation, Conditions: []*pbresource.Condition{{Type: "Ready", State: pbresource.Condition_STATE_TRUE}}}
	out, err := sw.WriteStatusCAS(ctx, stored, "ctl", st)
	require.NoError(t, err)
	require.Greater(t, parseVersion(t, out.Version), parseVersion(t, stored.Version))
	want := withVersion(stored, out.Version)
	want.Status["ctl"] = proto.Clone(st).(*pbresource.Status)
	requireProtoEqual(t, want, out, "WriteStatusCAS returns what it stored")
	requireProtoEqual(t, want, read(t, b, stored.Id))
	requireProtoEqual(t, want, next(t, ctx, w).GetUpsert().GetResource(), "the watch sees the status write")
	require.NotContains(t, stored.Status, "ctl", "the resource given is not changed")
	st = proto.Clone(st).(*pbresource.Status) // the first one is the backend's now

	// Only the stored resource itself is current.
	_, err = sw.WriteStatusCAS(ctx, stored, "ctl", st)
	require.ErrorIs(t, err, storage.ErrCASFailure, "an older version")
	_, err = sw.WriteStatusCAS(ctx, proto.Clone(out).(*pbresource.Resource), "ctl", st)
	require.ErrorIs(t, err, storage.ErrCASFailure, "a copy")
	requireProtoEqual(t, want, read(t, b, stored.Id), "failed writes change nothing")

	require.NoError(t, b.DeleteCAS(context.Background(), out.Id, ""))
	_, err = sw.WriteStatusCAS(ctx, out, "ctl", st)
	require.ErrorIs(t, err, storage.ErrCASFailure, "a deleted resource")
	_, err = b.Read(ctx, storage.StrongConsistency, out.Id)
	require.ErrorIs(t, err, storage.ErrNotFound)
}
