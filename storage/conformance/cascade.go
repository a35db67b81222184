package conformance

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// graveV1 is the type the suite's tombstones have; to a backend, a
// tombstone is a resource like any other.
var graveV1 = &pbresource.Type{Group: "demo", GroupVersion: "v1", Kind: "Grave"}

// newTombstone returns a tombstone to store when owner is deleted.
func newTombstone(owner *pbresource.ID) *pbresource.Resource {
	return newResource(graveV1, "default", "default", "grave-of-"+owner.Name)
}

// leave is the DeleteCAS option that leaves a copy of tomb behind.
func leave(tomb *pbresource.Resource) storage.DeleteOption {
	return storage.WithTombstone(func() (*pbresource.Resource, error) {
		return proto.Clone(tomb).(*pbresource.Resource), nil
	})
}

// ownedBy returns a new resource named name owned by owner.
func ownedBy(owner *pbresource.ID, name string) *pbresource.Resource {
	res := newResource(albumV1, "default", "default", name)
	res.Owner = proto.Clone(owner).(*pbresource.ID)
	return res
}

// testOwnerMustExist checks that WriteCAS refuses an owner that is not
// stored, and stores nothing.
func (s *suite) testOwnerMustExist(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)

	refused := func(res *pbresource.Resource, why string) {
		t.Helper()
		_, err := b.WriteCAS(ctx, res)
		require.ErrorIs(t, err, storage.ErrOwnerNotFound, why)
	}

	missing := newDefault("missing").Id
	refused(ownedBy(missing, "c1"), "an owner that was never stored")

	owner := write(t, b, newDefault("owner"))
	otherLifetime := proto.Clone(owner.Id).(*pbresource.ID)
	otherLifetime.Uid = newUid()
	refused(ownedBy(otherLifetime, "c1"), "an owner stored with another uid")

	_, err := b.Read(ctx, storage.EventualConsistency, ownedBy(missing, "c1").Id)
	require.ErrorIs(t, err, storage.ErrNotFound, "a refused create stores nothing")

	// The owner's GroupVersion plays no part; an empty owner Uid matches
	// whatever lifetime is stored.
	asV2 := proto.Clone(owner.Id).(*pbresource.ID)
	asV2.Type = proto.Clone(artistV2).(*pbresource.Type)
	write(t, b, ownedBy(asV2, "c2"))
	noUid := proto.Clone(owner.Id).(*pbresource.ID)
	noUid.Uid = ""
	write(t, b, ownedBy(noUid, "c3"))

	// Creating a name that exists, with an owner that exists, is a CAS
	// failure.
	c4 := write(t, b, ownedBy(owner.Id, "c4"))
	_, err = b.WriteCAS(ctx, ownedBy(owner.Id, "c4"))
	require.ErrorIs(t, err, storage.ErrCASFailure, "creating what exists")

	// An update that moves a resource to a missing owner is refused too.
	moved := proto.Clone(c4).(*pbresource.Resource)
	moved.Owner = otherLifetime
	refused(moved, "an update to an owner that is not stored")
	requireProtoEqual(t, c4, read(t, b, c4.Id), "a refused update changes nothing")

	// Once the owner is deleted, nothing more can be created under it.
	require.NoError(t, b.DeleteCAS(ctx, owner.Id, owner.Version))
	refused(ownedBy(owner.Id, "c5"), "an owner deleted before the write")
}

// testDeleteTombstone checks storage.WithTombstone: the tombstone is stored
// with the deletion exactly when the deleted resource owns something.
func (s *suite) testDeleteTombstone(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)

	requireNoTombstone := func(tomb *pbresource.Resource, why string) {
		t.Helper()
		_, err := b.Read(ctx, storage.StrongConsistency, tomb.Id)
		require.ErrorIs(t, err, storage.ErrNotFound, why)
	}

	// Owning nothing: no tombstone.
	lonely := write(t, b, newDefault("lonely"))
	tomb := newTombstone(lonely.Id)
	require.NoError(t, b.DeleteCAS(ctx, lonely.Id, lonely.Version, leave(tomb)))
	requireNoTombstone(tomb, "a resource that owns nothing leaves no tombstone")

	// A failed compare-and-swap stores nothing.
	parent := write(t, b, newDefault("parent"))
	child := write(t, b, ownedBy(parent.Id, "child"))
	tomb = newTombstone(parent.Id)
	stale := update(t, b, parent, "k", "v")
	require.ErrorIs(t, b.DeleteCAS(ctx, parent.Id, parent.Version, leave(tomb)), storage.ErrCASFailure)
	requireNoTombstone(tomb, "a delete that failed leaves no tombstone")
	read(t, b, parent.Id)

	// Owning something: the tombstone is stored as given, with a Version.
	require.NoError(t, b.DeleteCAS(ctx, parent.Id, stale.Version, leave(tomb)))
	_, err := b.Read(ctx, storage.StrongConsistency, parent.Id)
	require.ErrorIs(t, err, storage.ErrNotFound)
	got := read(t, b, tomb.Id)
	parseVersion(t, got.Version)
	requireProtoEqual(t, withVersion(tomb, got.Version), got)
	refs, err := b.OwnerReferences(ctx, parent.Id)
	require.NoError(t, err)
	require.Len(t, refs, 1)
	require.Equal(t, child.Id.Uid, refs[0].Uid)

	// A resource already stored under the tombstone's name is kept.
	again := write(t, b, newDefault("again"))
	write(t, b, ownedBy(again.Id, "again-child"))
	first := write(t, b, newTombstone(again.Id))
	second := newTombstone(again.Id)
	require.NoError(t, b.DeleteCAS(ctx, again.Id, "", leave(second)))
	requireProtoEqual(t, first, read(t, b, first.Id), "the stored tombstone is left as it was")
}

// testOwnerDeleteRace races creates of owned resources against the
// deletion of their owner and checks that none is orphaned: every create
// that succeeded is found by OwnerReferences after the deletion, and the
// deletion left a tombstone; every create that failed was refused with
// ErrOwnerNotFound and stored nothing.
func (s *suite) testOwnerDeleteRace(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)
	const (
		iterations = 100
		creators   = 4
		perCreator = 2
	)
	for i := range iterations {
		owner := write(t, b, newDefault(fmt.Sprintf("owner-%d", i)))
		tomb := newTombstone(owner.Id)

		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var created []*pbresource.Resource
		var refused []*pbresource.Resource
		errs := make(chan error, creators*perCreator)
		for c := range creators {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for n := range perCreator {
					res := ownedBy(owner.Id, fmt.Sprintf("child-%d-%d-%d", i, c, n))
					out, err := b.WriteCAS(ctx, res)
					mu.Lock()
					switch {
					case err == nil:
						created = append(created, out)
					case errors.Is(err, storage.ErrOwnerNotFound):
						refused = append(refused, res)
					default:
						errs <- err
					}
					mu.Unlock()
				}
			}()
		}
		var delErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			delErr = b.DeleteCAS(ctx, owner.Id, owner.Version, leave(tomb))
		}()
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err, "iteration %d: a create failed for another reason than a missing owner", i)
		}
		require.NoError(t, delErr, "iteration %d", i)

		refs, err := b.OwnerReferences(ctx, owner.Id)
		require.NoError(t, err)
		found := make(map[string]bool, len(refs))
		for _, ref := range refs {
			found[ref.Uid] = true
		}
		for _, res := range created {
			require.True(t, found[res.Id.Uid], "iteration %d: %s was created but its deleted owner does not list it: an orphan", i, key(res.Id))
		}
		require.Len(t, refs, len(created), "iteration %d: the owner lists exactly what was created", i)
		_, err = b.Read(ctx, storage.StrongConsistency, tomb.Id)
		if len(created) > 0 {
			require.NoError(t, err, "iteration %d: %d resources were created but no tombstone was left", i, len(created))
		} else {
			require.ErrorIs(t, err, storage.ErrNotFound, "iteration %d: a tombstone for an owner of nothing", i)
		}
		for _, res := range refused {
			_, err := b.Read(ctx, storage.StrongConsistency, res.Id)
			require.ErrorIs(t, err, storage.ErrNotFound, "iteration %d: a refused create stored %s", i, key(res.Id))
		}
	}
}
