package conformance

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

func (s *suite) testCreate(t *testing.T) {
	b := s.newBackend(t)
	in := newDefault("create")
	before := proto.Clone(in)

	out, err := b.WriteCAS(context.Background(), in)
	require.NoError(t, err)
	require.NotEmpty(t, out.Version)
	require.NotZero(t, parseVersion(t, out.Version))
	requireProtoEqual(t, withVersion(in, out.Version), out, "WriteCAS returns what it stored")
	requireProtoEqual(t, before, in, "WriteCAS must not modify its input")

	got := read(t, b, in.Id)
	requireProtoEqual(t, out, got)

	got, err = b.Read(context.Background(), storage.StrongConsistency, in.Id)
	require.NoError(t, err)
	requireProtoEqual(t, out, got)
}

func (s *suite) testCreateExisting(t *testing.T) {
	b := s.newBackend(t)
	stored := write(t, b, newDefault("exists"))

	// Same lifetime, empty version: the resource must not exist.
	again := withVersion(stored, "")
	again.Metadata["changed"] = "yes"
	_, err := b.WriteCAS(context.Background(), again)
	require.ErrorIs(t, err, storage.ErrCASFailure)

	// A new lifetime of the name while the old one exists: both rules are
	// broken, either error will do.
	other := newDefault("exists")
	_, err = b.WriteCAS(context.Background(), other)
	requireErrorIsOneOf(t, err, storage.ErrCASFailure, storage.ErrWrongUid)

	requireProtoEqual(t, stored, read(t, b, stored.Id), "failed writes change nothing")
}

func (s *suite) testVersionedWriteOfMissing(t *testing.T) {
	b := s.newBackend(t)
	// Make sure the store has some revisions, so "1" is a real version.
	write(t, b, newDefault("other"))

	res := newDefault("missing")
	res.Version = "1"
	_, err := b.WriteCAS(context.Background(), res)
	require.ErrorIs(t, err, storage.ErrCASFailure)

	_, err = b.Read(context.Background(), storage.EventualConsistency, res.Id)
	require.ErrorIs(t, err, storage.ErrNotFound)
}

func (s *suite) testUpdate(t *testing.T) {
	b := s.newBackend(t)
	v1 := write(t, b, newDefault("update"))

	v2 := update(t, b, v1, "step", "2")
	require.Greater(t, parseVersion(t, v2.Version), parseVersion(t, v1.Version))
	require.Equal(t, "2", v2.Metadata["step"])
	require.Equal(t, v1.Id.Uid, v2.Id.Uid)

	// Stale version.
	stale := proto.Clone(v1).(*pbresource.Resource)
	stale.Metadata["step"] = "stale"
	_, err := b.WriteCAS(context.Background(), stale)
	require.ErrorIs(t, err, storage.ErrCASFailure)

	// A version the resource never had.
	future := proto.Clone(v2).(*pbresource.Resource)
	future.Version = strconv.FormatUint(parseVersion(t, v2.Version)+1000, 10)
	_, err = b.WriteCAS(context.Background(), future)
	require.ErrorIs(t, err, storage.ErrCASFailure)

	requireProtoEqual(t, v2, read(t, b, v1.Id))

	v3 := update(t, b, v2, "step", "3")
	require.Greater(t, parseVersion(t, v3.Version), parseVersion(t, v2.Version))
	requireProtoEqual(t, v3, read(t, b, v1.Id))
}

func (s *suite) testWriteWrongUid(t *testing.T) {
	b := s.newBackend(t)
	stored := write(t, b, newDefault("uid"))

	res := proto.Clone(stored).(*pbresource.Resource)
	res.Id.Uid = newUid()
	res.Metadata["changed"] = "yes"
	_, err := b.WriteCAS(context.Background(), res)
	require.ErrorIs(t, err, storage.ErrWrongUid)

	requireProtoEqual(t, stored, read(t, b, stored.Id))
}

func (s *suite) testReplaceGroupVersion(t *testing.T) {
	b := s.newBackend(t)
	v1 := write(t, b, newDefault("gv"))

	res := proto.Clone(v1).(*pbresource.Resource)
	res.Id.Type = proto.Clone(artistV2).(*pbresource.Type)
	v2, err := b.WriteCAS(context.Background(), res)
	require.NoError(t, err)
	require.Equal(t, "v2", v2.Id.Type.GroupVersion)
	require.Greater(t, parseVersion(t, v2.Version), parseVersion(t, v1.Version))

	got := read(t, b, res.Id)
	requireProtoEqual(t, v2, got)

	var mismatch storage.GroupVersionMismatchError
	_, err = b.Read(context.Background(), storage.EventualConsistency, v1.Id)
	require.ErrorAs(t, err, &mismatch)
	requireProtoEqual(t, v2, mismatch.Stored)

	list, err := b.List(context.Background(), storage.EventualConsistency, artist, defaultTenancy, "")
	require.NoError(t, err)
	require.Len(t, list, 1)
	requireProtoEqual(t, v2, list[0])
}

func (s *suite) testConcurrentIncrements(t *testing.T) {
	b := s.newBackend(t)
	const (
		workers    = 8
		increments = 25
	)
	res := newDefault("counter")
	res.Metadata["n"] = "0"
	created := write(t, b, res)

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for done := 0; done < increments; {
				cur, err := b.Read(context.Background(), storage.StrongConsistency, created.Id)
				if err != nil {
					errs <- err
					return
				}
				n, err := strconv.Atoi(cur.Metadata["n"])
				if err != nil {
					errs <- err
					return
				}
				next := proto.Clone(cur).(*pbresource.Resource)
				next.Metadata["n"] = strconv.Itoa(n + 1)
				_, err = b.WriteCAS(context.Background(), next)
				switch {
				case errors.Is(err, storage.ErrCASFailure):
					// Lost the race: read again.
				case err != nil:
					errs <- err
					return
				default:
					done++
				}
			}
		})
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	s.wait(t, finished, "concurrent increments")
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}

	got := read(t, b, created.Id)
	require.Equal(t, strconv.Itoa(workers*increments), got.Metadata["n"], "an increment was lost")
	require.GreaterOrEqual(t, parseVersion(t, got.Version), parseVersion(t, created.Version)+workers*increments)
}

func (s *suite) testVersions(t *testing.T) {
	b := s.newBackend(t)
	var last uint64
	next := func(v string) {
		t.Helper()
		n := parseVersion(t, v)
		require.Greater(t, n, last, "versions must grow store-wide")
		last = n
	}

	a := write(t, b, newDefault("a"))
	next(a.Version)
	c := write(t, b, newResource(albumV1, "default", "default", "c"))
	next(c.Version)
	x := write(t, b, newResource(otherArtistV1, "p", "n", "x"))
	next(x.Version)
	a = update(t, b, a, "k", "v")
	next(a.Version)
	c = update(t, b, c, "k", "v")
	next(c.Version)

	// Deleting and creating the name again gives a greater version too.
	require.NoError(t, b.DeleteCAS(context.Background(), a.Id, a.Version))
	a2 := write(t, b, newDefault("a"))
	next(a2.Version)
}

func (s *suite) testReadNotFound(t *testing.T) {
	b := s.newBackend(t)
	_, err := b.Read(context.Background(), storage.EventualConsistency, newDefault("missing").Id)
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = b.Read(context.Background(), storage.StrongConsistency, newDefault("missing").Id)
	require.ErrorIs(t, err, storage.ErrNotFound)

	// Same name in another tenancy or type is another resource.
	write(t, b, newDefault("present"))
	for _, id := range []*pbresource.ID{
		newID(artistV1, "default", "other", "present"),
		newID(artistV1, "other", "default", "present"),
		newID(albumV1, "default", "default", "present"),
		newID(otherArtistV1, "default", "default", "present"),
	} {
		id.Uid = ""
		_, err = b.Read(context.Background(), storage.EventualConsistency, id)
		require.ErrorIs(t, err, storage.ErrNotFound, key(id))
	}
}

func (s *suite) testReadUid(t *testing.T) {
	b := s.newBackend(t)
	stored := write(t, b, newDefault("uid"))

	id := proto.Clone(stored.Id).(*pbresource.ID)
	id.Uid = ""
	requireProtoEqual(t, stored, read(t, b, id), "an empty Uid matches any lifetime")

	id.Uid = newUid()
	_, err := b.Read(context.Background(), storage.EventualConsistency, id)
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = b.Read(context.Background(), storage.StrongConsistency, id)
	require.ErrorIs(t, err, storage.ErrNotFound)
}

func (s *suite) testReadGroupVersionMismatch(t *testing.T) {
	b := s.newBackend(t)
	stored := write(t, b, newResource(artistV2, "default", "default", "gv"))

	id := proto.Clone(stored.Id).(*pbresource.ID)
	id.Type = proto.Clone(artistV1).(*pbresource.Type)
	for _, c := range []storage.ReadConsistency{storage.EventualConsistency, storage.StrongConsistency} {
		_, err := b.Read(context.Background(), c, id)
		var mismatch storage.GroupVersionMismatchError
		require.ErrorAs(t, err, &mismatch, c.String())
		requireProtoEqual(t, artistV1, mismatch.RequestedType)
		requireProtoEqual(t, stored, mismatch.Stored)
	}

	// A wrong Uid is NotFound, whatever the GroupVersion.
	id.Uid = newUid()
	_, err := b.Read(context.Background(), storage.EventualConsistency, id)
	require.ErrorIs(t, err, storage.ErrNotFound)
}

func (s *suite) testDelete(t *testing.T) {
	b := s.newBackend(t)
	ctx := context.Background()
	v1 := write(t, b, newDefault("del"))
	v2 := update(t, b, v1, "k", "v")

	require.ErrorIs(t, b.DeleteCAS(ctx, v1.Id, v1.Version), storage.ErrCASFailure, "stale version")
	requireProtoEqual(t, v2, read(t, b, v1.Id))

	require.NoError(t, b.DeleteCAS(ctx, v2.Id, v2.Version))
	_, err := b.Read(ctx, storage.EventualConsistency, v2.Id)
	require.ErrorIs(t, err, storage.ErrNotFound)
	_, err = b.Read(ctx, storage.StrongConsistency, v2.Id)
	require.ErrorIs(t, err, storage.ErrNotFound)

	// Idempotent: deleting what is gone succeeds, with or without a version.
	require.NoError(t, b.DeleteCAS(ctx, v2.Id, v2.Version))
	require.NoError(t, b.DeleteCAS(ctx, v2.Id, ""))
	require.NoError(t, b.DeleteCAS(ctx, newDefault("never").Id, "12345"))

	// An empty version deletes whatever is stored.
	other := write(t, b, newDefault("blanket"))
	other = update(t, b, other, "k", "v")
	require.NoError(t, b.DeleteCAS(ctx, other.Id, ""))
	_, err = b.Read(ctx, storage.EventualConsistency, other.Id)
	require.ErrorIs(t, err, storage.ErrNotFound)

	// Deleting one resource leaves its neighbours alone.
	n1 := write(t, b, newDefault("n1"))
	n2 := write(t, b, newResource(artistV1, "default", "other", "n1"))
	require.NoError(t, b.DeleteCAS(ctx, n1.Id, n1.Version))
	requireProtoEqual(t, n2, read(t, b, n2.Id))
}

func (s *suite) testDeleteUid(t *testing.T) {
	b := s.newBackend(t)
	ctx := context.Background()
	stored := write(t, b, newDefault("uid"))

	id := proto.Clone(stored.Id).(*pbresource.ID)
	id.Uid = newUid()
	require.NoError(t, b.DeleteCAS(ctx, id, stored.Version), "wrong Uid: nothing to do")
	require.NoError(t, b.DeleteCAS(ctx, id, ""), "wrong Uid: nothing to do")
	require.NoError(t, b.DeleteCAS(ctx, id, "999999"), "wrong Uid: nothing to do, whatever the version")
	requireProtoEqual(t, stored, read(t, b, stored.Id))

	id.Uid = ""
	require.NoError(t, b.DeleteCAS(ctx, id, stored.Version), "empty Uid matches any lifetime")
	_, err := b.Read(ctx, storage.EventualConsistency, stored.Id)
	require.ErrorIs(t, err, storage.ErrNotFound)
}

// testDeleteMustExist: with storage.MustExist, a delete that finds nothing
// to delete (nothing under the name, or another lifetime) is a CAS failure.
func (s *suite) testDeleteMustExist(t *testing.T) {
	b := s.newBackend(t)
	ctx := context.Background()
	stored := write(t, b, newDefault("must"))

	other := proto.Clone(stored.Id).(*pbresource.ID)
	other.Uid = newUid()
	require.ErrorIs(t, b.DeleteCAS(ctx, other, stored.Version, storage.MustExist()), storage.ErrCASFailure, "another lifetime")
	require.NoError(t, b.DeleteCAS(ctx, stored.Id, stored.Version, storage.MustExist()), "the one stored")
	require.ErrorIs(t, b.DeleteCAS(ctx, stored.Id, stored.Version, storage.MustExist()), storage.ErrCASFailure, "gone")
	require.NoError(t, b.DeleteCAS(ctx, stored.Id, stored.Version), "gone, without MustExist")
	never := newDefault("never").Id
	require.ErrorIs(t, b.DeleteCAS(ctx, never, "", storage.MustExist()), storage.ErrCASFailure, "never stored")
}

func (s *suite) testDeleteGroupVersionIgnored(t *testing.T) {
	b := s.newBackend(t)
	stored := write(t, b, newDefault("gv"))

	id := proto.Clone(stored.Id).(*pbresource.ID)
	id.Type = proto.Clone(artistV2).(*pbresource.Type)
	require.NoError(t, b.DeleteCAS(context.Background(), id, stored.Version))
	_, err := b.Read(context.Background(), storage.EventualConsistency, stored.Id)
	require.ErrorIs(t, err, storage.ErrNotFound)
}

// testCopyOnWrite checks that a backend keeps no reference to the messages
// it is given: changing the caller's message after WriteCAS changes neither
// what WriteCAS returned, nor what Read, List and WatchList return.
func (s *suite) testCopyOnWrite(t *testing.T) {
	b := s.newBackend(t)
	ctx := s.ctx(t)

	w, err := b.WatchList(ctx, artist, allTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	requireEndOfSnapshot(t, next(t, ctx, w))

	owner := write(t, b, newResource(albumV1, "default", "default", "owner"))
	in := newDefault("copy")
	in.Owner = proto.Clone(owner.Id).(*pbresource.ID)
	in.Status = map[string]*pbresource.Status{"ctl": {ObservedGeneration: in.Generation}}
	out := write(t, b, in)
	want := withVersion(in, out.Version)

	mutate := func(res *pbresource.Resource) {
		res.Id.Name = "mutated"
		res.Id.Uid = "mutated"
		res.Id.Type.Kind = "Mutated"
		res.Id.Tenancy.Namespace = "mutated"
		res.Owner.Name = "mutated"
		res.Metadata["origin"] = "mutated"
		res.Metadata["extra"] = "mutated"
		res.Status["ctl"].ObservedGeneration = "mutated"
		res.Status["other"] = &pbresource.Status{}
		res.Generation = "mutated"
		data, err := anypb.New(wrapperspb.String("mutated"))
		require.NoError(t, err)
		res.Data.Value = data.Value
	}
	mutate(in)

	requireProtoEqual(t, want, out, "result of WriteCAS changed with its input")
	requireProtoEqual(t, want, read(t, b, want.Id), "stored resource changed with the input")
	list, err := b.List(ctx, storage.EventualConsistency, artist, defaultTenancy, "")
	require.NoError(t, err)
	require.Len(t, list, 1)
	requireProtoEqual(t, want, list[0])
	ev := next(t, ctx, w)
	requireProtoEqual(t, want, ev.GetUpsert().GetResource(), "watch event changed with the input")

	// The same for an update.
	in2 := proto.Clone(out).(*pbresource.Resource)
	in2.Metadata["origin"] = "update"
	out2 := write(t, b, in2)
	want2 := withVersion(in2, out2.Version)
	mutate(in2)
	requireProtoEqual(t, want2, out2)
	requireProtoEqual(t, want2, read(t, b, want2.Id))
	requireProtoEqual(t, want2, next(t, ctx, w).GetUpsert().GetResource())
}
