package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// historian returns a new backend with history kept within limits, or skips
// the test if the suite has no Options.NewHistorian.
func (s *suite) historian(t *testing.T, limits storage.HistoryLimits) (storage.Backend, storage.Historian) {
	t.Helper()
	if s.opts.NewHistorian == nil {
		t.Skip("the backend keeps no history (Options.NewHistorian is nil)")
	}
	b := s.opts.NewHistorian(t, limits)
	h, ok := b.(storage.Historian)
	require.True(t, ok, "NewHistorian returned a %T, not a storage.Historian", b)
	return b, h
}

// unbounded keeps everything, for tests of what is recorded.
var unbounded = storage.HistoryLimits{KeepVersions: -1, TrashRetention: -1, TrashPerType: -1}

// allRevisions pages through the revisions of id's name, limit at a time.
func allRevisions(t *testing.T, h storage.Historian, id *pbresource.ID, limit int) []storage.Revision {
	t.Helper()
	return allPages(t, limit, func(req storage.RevisionPageRequest) (storage.RevisionPage, error) {
		return h.ListRevisions(context.Background(), id, req)
	})
}

func allPages(t *testing.T, limit int, list func(storage.RevisionPageRequest) (storage.RevisionPage, error)) []storage.Revision {
	t.Helper()
	var out []storage.Revision
	req := storage.RevisionPageRequest{Limit: limit}
	for {
		p, err := list(req)
		require.NoError(t, err)
		if limit > 0 {
			require.LessOrEqual(t, len(p.Revisions), limit, "a page holds at most its limit")
		}
		out = append(out, p.Revisions...)
		if p.Next == "" {
			return out
		}
		require.NotEmpty(t, p.Revisions, "a page with a Next holds revisions")
		req.Before = p.Next
	}
}

// versionsOf returns the versions of revs, with a D for deletions.
func versionsOf(revs []storage.Revision) []string {
	out := make([]string, len(revs))
	for i, r := range revs {
		out[i] = r.Version
		if r.Deleted {
			out[i] = "D" + r.Version
		}
	}
	return out
}

// eventually waits, up to the suite's timeout, for cond to hold.
func (s *suite) eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(s.opts.Timeout)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNow(t, "timed out waiting: "+what)
		}
		<-time.After(pollInterval)
	}
}

// pollInterval is how often eventually checks its condition, letting the
// backend's background work run between checks.
const pollInterval = 5 * time.Millisecond

// testHistoryGenerations checks that the history of a resource holds
// exactly the committed changes of generation, in order, under concurrent
// writers that also write statuses (which are not recorded) and lose CAS
// races (which record nothing).
func (s *suite) testHistoryGenerations(t *testing.T) {
	b, h := s.historian(t, unbounded)
	ctx := s.ctx(t)
	first := write(t, b, newDefault("contended"))

	var mu sync.Mutex
	committed := []string{first.Version}
	const writers, writes = 4, 15
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < writes; {
				cur, err := b.Read(ctx, storage.StrongConsistency, first.Id)
				if err != nil {
					t.Error(err)
					return
				}
				next := proto.Clone(cur).(*pbresource.Resource)
				genChange := i%2 == 0
				if genChange {
					next.Generation = newUid()
					next.Metadata = map[string]string{"writer": strconv.Itoa(w), "i": strconv.Itoa(i)}
				} else {
					next.Status = map[string]*pbresource.Status{"w" + strconv.Itoa(w): {ObservedGeneration: cur.Generation}}
				}
				out, err := b.WriteCAS(ctx, next)
				if errors.Is(err, storage.ErrCASFailure) {
					continue // lost the race: recorded nothing
				}
				if err != nil {
					t.Error(err)
					return
				}
				if genChange {
					mu.Lock()
					committed = append(committed, out.Version)
					mu.Unlock()
				}
				i++
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	if sw, ok := b.(storage.StatusWriter); ok {
		cur := read(t, b, first.Id)
		_, err := sw.WriteStatusCAS(ctx, cur, "by-status-writer", &pbresource.Status{ObservedGeneration: cur.Generation})
		require.NoError(t, err)
	}
	stale := proto.Clone(first).(*pbresource.Resource)
	stale.Generation = newUid()
	_, err := b.WriteCAS(ctx, stale)
	require.ErrorIs(t, err, storage.ErrCASFailure)

	want := slices.Clone(committed)
	slices.SortFunc(want, func(x, y string) int { return cmp.Compare(parseVersion(t, y), parseVersion(t, x)) })
	for _, limit := range []int{0, 1, 7} {
		revs := allRevisions(t, h, first.Id, limit)
		require.Equal(t, want, versionsOf(revs), "history (limit %d) holds exactly the committed generations, newest first", limit)
		for _, r := range revs {
			require.Equal(t, r.Version, r.Resource.Version, "a write's revision holds the resource at its version")
			got, err := h.ReadRevision(ctx, first.Id, r.Version)
			require.NoError(t, err)
			requireProtoEqual(t, r.Resource, got.Resource)
		}
	}
}

// testHistoryChange checks that a revision records its Change, that a
// deletion is recorded with its own version and the last stored resource,
// and how ReadRevision finds revisions.
func (s *suite) testHistoryChange(t *testing.T) {
	b, h := s.historian(t, unbounded)
	ctx := s.ctx(t)
	owner := write(t, b, newDefault("owner"))
	created, err := b.WriteCAS(storage.WithChange(ctx, storage.Change{By: "alice"}), ownedBy(owner.Id, "child"))
	require.NoError(t, err)
	changed := proto.Clone(created).(*pbresource.Resource)
	changed.Generation = newUid()
	updated, err := b.WriteCAS(storage.WithChange(ctx, storage.Change{By: "bob"}), changed)
	require.NoError(t, err)
	cascade := storage.Change{By: "reaper", CascadeFrom: owner.Id}
	require.NoError(t, b.DeleteCAS(storage.WithChange(ctx, cascade), updated.Id, updated.Version))

	revs := allRevisions(t, h, created.Id, 0)
	require.Len(t, revs, 3)
	del := revs[0]
	require.True(t, del.Deleted)
	require.Greater(t, parseVersion(t, del.Version), parseVersion(t, updated.Version), "a deletion has a version of its own")
	requireProtoEqual(t, updated, del.Resource, "a deletion records the last stored resource")
	require.Equal(t, "reaper", del.By)
	requireProtoEqual(t, owner.Id, del.CascadeFrom)
	require.Equal(t, []string{"bob", "alice"}, []string{revs[1].By, revs[2].By})
	require.Nil(t, revs[1].CascadeFrom)
	require.False(t, revs[1].Deleted)
	require.Equal(t, []bool{false, false, true}, []bool{revs[0].Created, revs[1].Created, revs[2].Created}, "only the create's revision is the creation")
	for _, r := range revs {
		require.False(t, r.Time.IsZero(), "a revision has a time")
	}
	require.False(t, revs[0].Time.Before(revs[2].Time), "times follow versions")

	got, err := h.ReadRevision(ctx, created.Id, del.Version)
	require.NoError(t, err)
	require.True(t, got.Deleted)
	got, err = h.ReadRevision(ctx, created.Id, created.Version)
	require.NoError(t, err)
	requireProtoEqual(t, created, got.Resource)
	require.Equal(t, "alice", got.By)

	otherUid := proto.Clone(created.Id).(*pbresource.ID)
	otherUid.Uid = newUid()
	_, err = h.ReadRevision(ctx, otherUid, created.Version)
	require.ErrorIs(t, err, storage.ErrNotFound, "a Uid that is not the revision's")
	_, err = h.ReadRevision(ctx, created.Id, owner.Version)
	require.ErrorIs(t, err, storage.ErrNotFound, "a version of another resource")

	// A second lifetime of the name is listed with the first.
	again := write(t, b, ownedBy(owner.Id, "child"))
	revs = allRevisions(t, h, again.Id, 2)
	require.Len(t, revs, 4)
	require.Equal(t, again.Version, revs[0].Version)
	require.Equal(t, again.Id.Uid, revs[0].Resource.Id.Uid)
}

// testHistoryNotRecorded checks what is not recorded: a failed CAS write or
// delete, a deletion of nothing, and the reaper's tombstones.
func (s *suite) testHistoryNotRecorded(t *testing.T) {
	b, h := s.historian(t, unbounded)
	ctx := s.ctx(t)
	stored := write(t, b, newDefault("a"))

	dup := newDefault("a")
	_, err := b.WriteCAS(ctx, dup)
	require.ErrorIs(t, err, storage.ErrCASFailure)
	require.ErrorIs(t, b.DeleteCAS(ctx, stored.Id, "1"), storage.ErrCASFailure)
	require.NoError(t, b.DeleteCAS(ctx, newDefault("never").Id, ""))
	require.Equal(t, []string{stored.Version}, versionsOf(allRevisions(t, h, stored.Id, 0)))

	tomb := newResource(resource.TypeV1Tombstone, "default", "default", "tomb")
	tomb = write(t, b, tomb)
	require.NoError(t, b.DeleteCAS(ctx, tomb.Id, ""))
	require.Empty(t, allRevisions(t, h, tomb.Id, 0), "tombstones are not recorded")
	trash, err := h.ListTrash(ctx, storage.UnversionedTypeFrom(resource.TypeV1Tombstone), allTenancy, "", storage.RevisionPageRequest{})
	require.NoError(t, err)
	require.Empty(t, trash.Revisions, "tombstones are not in the trash")
}

// testHistoryKeepVersions checks that pruning keeps the last KeepVersions
// write revisions of a name, and that a pruned version is not found.
func (s *suite) testHistoryKeepVersions(t *testing.T) {
	const keep = 3
	b, h := s.historian(t, storage.HistoryLimits{KeepVersions: keep})
	ctx := s.ctx(t)
	cur := write(t, b, newDefault("a"))
	versions := []string{cur.Version}
	for i := range 10 {
		next := proto.Clone(cur).(*pbresource.Resource)
		next.Generation = newUid()
		next.Metadata = map[string]string{"i": strconv.Itoa(i)}
		cur = write(t, b, next)
		versions = append(versions, cur.Version)
	}
	want := []string{versions[10], versions[9], versions[8]}
	s.eventually(t, func() bool {
		return fmt.Sprint(versionsOf(allRevisions(t, h, cur.Id, 0))) == fmt.Sprint(want)
	}, "the last 3 versions kept")
	_, err := h.ReadRevision(ctx, cur.Id, versions[0])
	require.ErrorIs(t, err, storage.ErrNotFound, "a pruned version")
	_, err = h.ReadRevision(ctx, cur.Id, versions[8])
	require.NoError(t, err)
}

// testHistoryTrashRetention checks that a deletion leaves the trash, with
// the history of its lifetime, after the retention.
func (s *suite) testHistoryTrashRetention(t *testing.T) {
	const retention = 3 * time.Second
	b, h := s.historian(t, storage.HistoryLimits{TrashRetention: retention})
	ctx := s.ctx(t)
	gone := write(t, b, newDefault("gone"))
	start := time.Now()
	require.NoError(t, b.DeleteCAS(ctx, gone.Id, ""))
	listed := func() int {
		p, err := h.ListTrash(ctx, artist, allTenancy, "", storage.RevisionPageRequest{})
		require.NoError(t, err)
		return len(p.Revisions)
	}
	if n := listed(); time.Since(start) < retention {
		require.Equal(t, 1, n, "a deletion is in the trash within the retention")
	}
	s.eventually(t, func() bool {
		// Writes give a backend that prunes as it writes the chance to.
		write(t, b, newDefault("w"+newUid()))
		return listed() == 0 && len(allRevisions(t, h, gone.Id, 0)) == 0
	}, "the deletion and its lifetime's history pruned after the retention")
	require.GreaterOrEqual(t, time.Since(start), retention, "not pruned before the retention")
}

// testHistoryTrashPerType checks the trash's count bound per type: after
// each deletion, the trash holds the newest deletions up to the bound.
func (s *suite) testHistoryTrashPerType(t *testing.T) {
	const perType = 3
	b, h := s.historian(t, storage.HistoryLimits{TrashPerType: perType})
	ctx := s.ctx(t)
	names := func(typ storage.UnversionedType) []string {
		p, err := h.ListTrash(ctx, typ, allTenancy, "", storage.RevisionPageRequest{})
		require.NoError(t, err)
		var out []string
		for _, r := range p.Revisions {
			out = append(out, r.Resource.Id.Name)
		}
		return out
	}
	for i := range 2 {
		res := write(t, b, newResource(albumV1, "default", "default", "b"+strconv.Itoa(i)))
		require.NoError(t, b.DeleteCAS(ctx, res.Id, ""))
	}
	var newest []string
	for i := range 7 {
		res := write(t, b, newDefault("a"+strconv.Itoa(i)))
		require.NoError(t, b.DeleteCAS(ctx, res.Id, ""))
		newest = append([]string{res.Id.Name}, newest...)
		if len(newest) > perType {
			newest = newest[:perType]
		}
		s.eventually(t, func() bool {
			return fmt.Sprint(names(artist)) == fmt.Sprint(newest)
		}, fmt.Sprintf("the trash holding %v", newest))
	}
	require.Equal(t, []string{"b1", "b0"}, names(album), "another type's trash has its own bound")
}

// testHistoryListTrash checks ListTrash's order, paging, filters and
// revisions.
func (s *suite) testHistoryListTrash(t *testing.T) {
	b, h := s.historian(t, unbounded)
	ctx := s.ctx(t)
	var all []*pbresource.Resource
	for _, r := range []*pbresource.Resource{
		newResource(artistV1, "default", "default", "x-1"),
		newResource(artistV1, "default", "ns2", "x-2"),
		newResource(artistV1, "p2", "default", "y-1"),
		newResource(artistV1, "default", "default", "y-2"),
		newResource(otherArtistV1, "default", "default", "x-3"),
		newResource(albumV1, "default", "default", "x-4"),
	} {
		all = append(all, write(t, b, r))
	}
	write(t, b, newResource(artistV1, "default", "default", "x-live"))
	// Delete in an order unlike the creates'.
	for _, i := range []int{2, 0, 5, 3, 1, 4} {
		require.NoError(t, b.DeleteCAS(ctx, all[i].Id, ""))
	}
	list := func(tenancy *pbresource.Tenancy, prefix string, limit int) []string {
		revs := allPages(t, limit, func(req storage.RevisionPageRequest) (storage.RevisionPage, error) {
			return h.ListTrash(ctx, artist, tenancy, prefix, req)
		})
		var out []string
		for _, r := range revs {
			require.True(t, r.Deleted)
			out = append(out, r.Resource.Id.Name)
		}
		return out
	}
	for _, limit := range []int{0, 1, 2} {
		require.Equal(t, []string{"x-2", "y-2", "x-1", "y-1"}, list(allTenancy, "", limit), "newest deletion first, limit %d", limit)
	}
	require.Equal(t, []string{"x-2", "x-1"}, list(allTenancy, "x-", 1))
	require.Equal(t, []string{"y-2", "x-1"}, list(defaultTenancy, "", 0))
	require.Equal(t, []string{"x-2", "y-2", "x-1"}, list(&pbresource.Tenancy{Partition: "default", Namespace: storage.Wildcard}, "", 0))
	require.Equal(t, []string{"y-1"}, list(&pbresource.Tenancy{Partition: "p2", Namespace: storage.Wildcard}, "", 0))
}

// testHistoryTrashOwnedBy checks that ListTrashOwnedBy finds what a
// lifetime of an owner owned, of any type.
func (s *suite) testHistoryTrashOwnedBy(t *testing.T) {
	b, h := s.historian(t, unbounded)
	ctx := s.ctx(t)
	owner := write(t, b, newDefault("owner"))
	other := write(t, b, newDefault("other"))

	c1 := write(t, b, ownedBy(owner.Id, "c1")) // an album
	c2 := newResource(artistV1, "ns2", "default", "c2")
	c2.Owner = owner.Id
	c2 = write(t, b, c2)
	c3 := write(t, b, ownedBy(other.Id, "c3"))
	write(t, b, ownedBy(owner.Id, "live"))
	require.NoError(t, b.DeleteCAS(ctx, c1.Id, ""))
	require.NoError(t, b.DeleteCAS(ctx, c3.Id, ""))
	require.NoError(t, b.DeleteCAS(ctx, c2.Id, ""))

	list := func(id *pbresource.ID, limit int) []string {
		revs := allPages(t, limit, func(req storage.RevisionPageRequest) (storage.RevisionPage, error) {
			return h.ListTrashOwnedBy(ctx, id, req)
		})
		var out []string
		for _, r := range revs {
			require.True(t, r.Deleted)
			out = append(out, r.Resource.Id.Name)
		}
		return out
	}
	for _, limit := range []int{0, 1} {
		require.Equal(t, []string{"c2", "c1"}, list(owner.Id, limit), "newest deletion first, limit %d", limit)
	}
	v2 := proto.Clone(owner.Id).(*pbresource.ID)
	v2.Type.GroupVersion = "v2"
	require.Equal(t, []string{"c2", "c1"}, list(v2, 0), "the owner's GroupVersion is ignored")
	require.Equal(t, []string{"c3"}, list(other.Id, 0))
	another := proto.Clone(owner.Id).(*pbresource.ID)
	another.Uid = newUid()
	require.Empty(t, list(another, 0), "another lifetime of the owner")
}
