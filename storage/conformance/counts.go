package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// deletionMark is the metadata key of a resource marked for deletion
// (resource.DeletionTimestampKey; the suite does not import resource).
const deletionMark = "deletionTimestamp"

// counter returns a new backend as a storage.Counter, skipping the test
// for a backend that counts nothing.
func (s *suite) counter(t *testing.T) (storage.Backend, storage.Counter) {
	b := s.newBackend(t)
	c, ok := b.(storage.Counter)
	if !ok {
		t.Skip("the backend is not a storage.Counter")
	}
	return b, c
}

// requireCounts waits until c's Stats are want (counts may lag behind
// writes, e.g. read from a change feed).
func (s *suite) requireCounts(t *testing.T, c storage.Counter, want []storage.Count, what string) {
	t.Helper()
	if want == nil {
		want = []storage.Count{}
	}
	var got []storage.Count
	s.eventually(t, func() bool {
		var err error
		got, err = c.Stats(context.Background())
		require.NoError(t, err)
		if got == nil {
			got = []storage.Count{}
		}
		return fmt.Sprint(got) == fmt.Sprint(want)
	}, fmt.Sprintf("%s: counts %v, want %v", what, &got, want))
}

// testCountsBasics checks storage.Counter: counts per type and tenancy
// after creates, updates, marks for deletion, tombstones and deletes.
func (s *suite) testCountsBasics(t *testing.T) {
	b, c := s.counter(t)
	ctx := s.ctx(t)
	s.requireCounts(t, c, nil, "an empty store")

	a1 := write(t, b, newDefault("a1"))
	a2 := write(t, b, newDefault("a2"))
	a3 := write(t, b, newResource(artistV1, "default", "other", "a3"))
	write(t, b, newResource(albumV1, "default", "default", "b1"))
	grave := storage.UnversionedTypeFrom(graveV1)
	s.requireCounts(t, c, []storage.Count{
		{Type: album, Partition: "default", Namespace: "default", Resources: 1},
		{Type: artist, Partition: "default", Namespace: "default", Resources: 2},
		{Type: artist, Partition: "default", Namespace: "other", Resources: 1},
	}, "after creates")

	// An update counts nothing; a mark for deletion counts as marked, and
	// later writes of the marked resource do not count it twice.
	a1 = update(t, b, a1, "k", "v")
	a1 = update(t, b, a1, deletionMark, "2026-01-01T00:00:00Z")
	a1 = update(t, b, a1, "k", "w")
	s.requireCounts(t, c, []storage.Count{
		{Type: album, Partition: "default", Namespace: "default", Resources: 1},
		{Type: artist, Partition: "default", Namespace: "default", Resources: 2, Marked: 1},
		{Type: artist, Partition: "default", Namespace: "other", Resources: 1},
	}, "after a mark for deletion")

	// Deleting the marked resource, which owns b2, leaves a tombstone; a
	// tenancy with nothing left is not counted.
	write(t, b, ownedBy(a1.Id, "b2"))
	require.NoError(t, b.DeleteCAS(ctx, a1.Id, a1.Version, leave(newTombstone(a1.Id))))
	require.NoError(t, b.DeleteCAS(ctx, a3.Id, ""))
	s.requireCounts(t, c, []storage.Count{
		{Type: album, Partition: "default", Namespace: "default", Resources: 2},
		{Type: artist, Partition: "default", Namespace: "default", Resources: 1},
		{Type: grave, Partition: "default", Namespace: "default", Resources: 1},
	}, "after deletes")

	// A delete of nothing, and a failed one, count nothing.
	require.NoError(t, b.DeleteCAS(ctx, a3.Id, ""))
	require.ErrorIs(t, b.DeleteCAS(ctx, a2.Id, "1"), storage.ErrCASFailure)
	s.requireCounts(t, c, []storage.Count{
		{Type: album, Partition: "default", Namespace: "default", Resources: 2},
		{Type: artist, Partition: "default", Namespace: "default", Resources: 1},
		{Type: grave, Partition: "default", Namespace: "default", Resources: 1},
	}, "after deletes that did nothing")
}

// testCountsConcurrent checks the counts under concurrent writers that
// create, mark, update and delete, racing on the same names: they end
// equal to what a listing finds.
func (s *suite) testCountsConcurrent(t *testing.T) {
	b, c := s.counter(t)
	ctx := s.ctx(t)
	// Counted before the writers start, so that their changes are counted
	// as they are made, not found by a first count afterwards.
	s.requireCounts(t, c, nil, "an empty store")
	const writers, names, rounds = 4, 8, 6
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				for n := range names {
					s.churn(ctx, b, fmt.Sprintf("n%d", n), (w+r+n)%4)
				}
			}
		})
	}
	wg.Wait()

	var want []storage.Count
	list, err := b.List(ctx, storage.EventualConsistency, artist, allTenancy, "")
	require.NoError(t, err)
	if len(list) > 0 {
		cnt := storage.Count{Type: artist, Partition: "default", Namespace: "default", Resources: int64(len(list))}
		for _, res := range list {
			if _, ok := res.Metadata[deletionMark]; ok {
				cnt.Marked++
			}
		}
		want = append(want, cnt)
	}
	s.requireCounts(t, c, want, "after concurrent writers")
}

// churn makes one change to the resource named name, chosen by op: create
// it, mark it for deletion, update it, or delete it. Conflicts with other
// writers are expected and ignored.
func (s *suite) churn(ctx context.Context, b storage.Backend, name string, op int) {
	res := newDefault(name)
	id := proto.Clone(res.Id).(*pbresource.ID)
	id.Uid = ""
	stored, err := b.Read(ctx, storage.StrongConsistency, id)
	if err != nil {
		_, _ = b.WriteCAS(ctx, res)
		return
	}
	switch op {
	case 0, 1:
		next := proto.Clone(stored).(*pbresource.Resource)
		if op == 0 {
			next.Metadata[deletionMark] = "2026-01-01T00:00:00Z"
		} else {
			next.Metadata["k"] = next.Version
		}
		_, _ = b.WriteCAS(ctx, next)
	default:
		_ = b.DeleteCAS(ctx, stored.Id, stored.Version)
	}
}
