// Package conformance is the test suite every storage.Backend must pass. It
// checks the behaviour the storage package documents: compare-and-swap
// writes and deletes, store-wide versions, Uid and GroupVersion rules, List
// filtering and order, WatchList snapshots and deltas (with writers racing
// the start of the watch), owner references (owners that must exist,
// tombstones, and creates racing the owner's deletion), the ownership of
// messages, how watches end (context, Close, a consumer that falls behind),
// and, for a backend that implements storage.ResumableBackend (the tests named
// Resume/ are skipped for one that does not), resuming from a version under
// racing writers, the fresh snapshot when a version is too old, and
// bookmarks; and for a storage.PagedLister (Pages/ tests, skipped for
// others), that the pages of a listing are the store at one version under
// racing writers, and that a version the backend no longer has is
// storage.ErrVersionGone; and for a storage.OwnerPagedLister (OwnedPages/
// tests, skipped for others), the same of an owner's resources of several
// types, under writers that also re-own them; and for a storage.StatusWriter (the
// WriteStatusCAS test, skipped for others), status writes; and, given
// Options.NewHistorian (History/ tests, skipped without it), the
// storage.Historian: exactly the committed generations recorded under
// concurrent writers, deletions with their Change, pruning to the
// HistoryLimits, and the trash listings; and for a storage.Counter
// (Counts/ tests, skipped for others), the counts per type and tenancy
// after creates, marks for deletion, tombstones and deletes, and under
// concurrent writers.
//
// A backend's own test calls Test (or TestWithOptions) with a function that
// returns a new, empty backend:
//
//	func TestBackend(t *testing.T) {
//		conformance.Test(t, func(t *testing.T) storage.Backend {
//			return inmem.New()
//		})
//	}
//
// Every subtest creates its own backend and runs in parallel with the
// others, so newBackend may be called concurrently. Waits are bounded by
// Options.Timeout; the suite never sleeps for a fixed time.
package conformance

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// Options tunes the suite for a backend.
type Options struct {
	// SlowWatcherWrites is how many writes the slow-watcher test makes while
	// one of its watches is never read. It must exceed the number of
	// changes the backend buffers for one watch and, for a
	// storage.ResumableBackend, how far back it can resume (the Resume/TooOld
	// test makes as many). Zero means 20,000.
	SlowWatcherWrites int

	// SkipSlowWatcher skips the slow-watcher and Resume/TooOld tests, e.g.
	// for a backend whose buffer is too large to overflow quickly in a
	// test. Such a backend should test its limit some other way.
	SkipSlowWatcher bool

	// NoBookmarks says the backend sends no bookmarks (storage.
	// ResumableBackend allows that): the Resume/Bookmarks test is skipped.
	NoBookmarks bool

	// Forget, if set, makes the backend forget the history of changes up
	// to now (etcd: a compaction at the current revision), for the
	// Resume/TooOld test of a backend that keeps history for long. The
	// test's writes are made before it is called.
	Forget func(t *testing.T, b storage.Backend)

	// NewHistorian, if set, returns a new, empty backend that keeps history
	// (storage.Historian) within limits, for the History/ tests, which are
	// skipped when it is nil. A backend that prunes in the background
	// should do so promptly for the tests (they wait for pruning up to
	// Timeout).
	NewHistorian func(t *testing.T, limits storage.HistoryLimits) storage.Backend

	// Timeout bounds every wait of the suite: an event to arrive, writes to
	// complete. Zero means 30 seconds.
	Timeout time.Duration
}

// Test runs the suite with default options. newBackend is called once per
// subtest, possibly concurrently, and must return an empty backend that
// shares no resources with the others.
func Test(t *testing.T, newBackend func(t *testing.T) storage.Backend) {
	TestWithOptions(t, newBackend, Options{})
}

// TestWithOptions runs the suite with opts.
func TestWithOptions(t *testing.T, newBackend func(t *testing.T) storage.Backend, opts Options) {
	if opts.SlowWatcherWrites <= 0 {
		opts.SlowWatcherWrites = 20000
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 30 * time.Second
	}
	s := &suite{newBackend: newBackend, opts: opts}

	tests := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"WriteCAS/Create", s.testCreate},
		{"WriteCAS/CreateExisting", s.testCreateExisting},
		{"WriteCAS/VersionedWriteOfMissing", s.testVersionedWriteOfMissing},
		{"WriteCAS/Update", s.testUpdate},
		{"WriteCAS/WrongUid", s.testWriteWrongUid},
		{"WriteCAS/ReplaceGroupVersion", s.testReplaceGroupVersion},
		{"WriteCAS/ConcurrentIncrements", s.testConcurrentIncrements},
		{"Versions", s.testVersions},
		{"Read/NotFound", s.testReadNotFound},
		{"Read/Uid", s.testReadUid},
		{"Read/GroupVersionMismatch", s.testReadGroupVersionMismatch},
		{"DeleteCAS", s.testDelete},
		{"DeleteCAS/Uid", s.testDeleteUid},
		{"DeleteCAS/MustExist", s.testDeleteMustExist},
		{"DeleteCAS/GroupVersionIgnored", s.testDeleteGroupVersionIgnored},
		{"CopyOnWrite", s.testCopyOnWrite},
		{"WriteStatusCAS", s.testWriteStatusCAS},
		{"List", s.testList},
		{"OwnerReferences", s.testOwnerReferences},
		{"OwnerReferences/OwnerMustExist", s.testOwnerMustExist},
		{"OwnerReferences/OwnerDeleteRace", s.testOwnerDeleteRace},
		{"DeleteCAS/Tombstone", s.testDeleteTombstone},
		{"WatchList/SnapshotThenDeltas", s.testWatchSnapshotThenDeltas},
		{"WatchList/EmptySnapshot", s.testWatchEmptySnapshot},
		{"WatchList/Filters", s.testWatchFilters},
		{"WatchList/GroupVersions", s.testWatchGroupVersions},
		{"WatchList/RacingWriters", s.testWatchRacingWriters},
		{"WatchList/RacingWritersWithDeletes", s.testWatchRacingWritersWithDeletes},
		{"Watch/ContextDone", s.testWatchContextDone},
		{"Watch/Close", s.testWatchClose},
		{"Watch/CloseUnblocksNext", s.testWatchCloseUnblocksNext},
		{"Watch/SlowWatcher", s.testSlowWatcher},
		{"Resume/Basics", s.testResumeBasics},
		{"Resume/RacingWriters", s.testResumeRacingWriters},
		{"Resume/TooOld", s.testResumeTooOld},
		{"Resume/Bookmarks", s.testBookmarks},
		{"Pages/Basics", s.testPagesBasics},
		{"Pages/ChangesBetween", s.testPagesChangesBetween},
		{"Pages/RacingWriters", s.testPagesRacingWriters},
		{"Pages/TooOld", s.testPagesTooOld},
		{"OwnedPages/Basics", s.testOwnedPagesBasics},
		{"OwnedPages/RacingWriters", s.testOwnedPagesRacingWriters},
		{"OwnedPages/TooOld", s.testOwnedPagesTooOld},
		{"History/Generations", s.testHistoryGenerations},
		{"History/Change", s.testHistoryChange},
		{"History/NotRecorded", s.testHistoryNotRecorded},
		{"History/KeepVersions", s.testHistoryKeepVersions},
		{"History/TrashRetention", s.testHistoryTrashRetention},
		{"History/TrashPerType", s.testHistoryTrashPerType},
		{"History/ListTrash", s.testHistoryListTrash},
		{"History/TrashOwnedBy", s.testHistoryTrashOwnedBy},
		{"Counts/Basics", s.testCountsBasics},
		{"Counts/Concurrent", s.testCountsConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t)
		})
	}
}

type suite struct {
	newBackend func(t *testing.T) storage.Backend
	opts       Options
}

// Types used by the suite: Artist in two GroupVersions, another Kind of the
// same Group, and the same Kind in another Group.
var (
	artistV1      = &pbresource.Type{Group: "demo", GroupVersion: "v1", Kind: "Artist"}
	artistV2      = &pbresource.Type{Group: "demo", GroupVersion: "v2", Kind: "Artist"}
	albumV1       = &pbresource.Type{Group: "demo", GroupVersion: "v1", Kind: "Album"}
	otherArtistV1 = &pbresource.Type{Group: "other", GroupVersion: "v1", Kind: "Artist"}

	artist = storage.UnversionedTypeFrom(artistV1)
	album  = storage.UnversionedTypeFrom(albumV1)

	defaultTenancy = &pbresource.Tenancy{Partition: "default", Namespace: "default"}
	allTenancy     = &pbresource.Tenancy{Partition: storage.Wildcard, Namespace: storage.Wildcard}
)

func newUid() string { return ulid.Make().String() }

func newID(typ *pbresource.Type, partition, namespace, name string) *pbresource.ID {
	return &pbresource.ID{
		Uid:     newUid(),
		Name:    name,
		Type:    proto.Clone(typ).(*pbresource.Type),
		Tenancy: &pbresource.Tenancy{Partition: partition, Namespace: namespace},
	}
}

// newResource returns a resource ready to create, with data and metadata so
// that copies can be told apart from shared messages. It is safe to call
// from any goroutine.
func newResource(typ *pbresource.Type, partition, namespace, name string) *pbresource.Resource {
	value, _ := proto.Marshal(wrapperspb.String("data of " + name)) // cannot fail
	data := &anypb.Any{TypeUrl: "type.googleapis.com/google.protobuf.StringValue", Value: value}
	return &pbresource.Resource{
		Id:         newID(typ, partition, namespace, name),
		Generation: newUid(),
		Metadata:   map[string]string{"origin": "conformance"},
		Data:       data,
	}
}

func newDefault(name string) *pbresource.Resource {
	return newResource(artistV1, "default", "default", name)
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.Timeout)
	t.Cleanup(cancel)
	return ctx
}

func write(t *testing.T, b storage.Backend, res *pbresource.Resource) *pbresource.Resource {
	t.Helper()
	out, err := b.WriteCAS(context.Background(), res)
	require.NoError(t, err)
	return out
}

// update writes a changed copy of stored with a CAS on its version.
func update(t *testing.T, b storage.Backend, stored *pbresource.Resource, key, value string) *pbresource.Resource {
	t.Helper()
	res := proto.Clone(stored).(*pbresource.Resource)
	if res.Metadata == nil {
		res.Metadata = map[string]string{}
	}
	res.Metadata[key] = value
	return write(t, b, res)
}

func read(t *testing.T, b storage.Backend, id *pbresource.ID) *pbresource.Resource {
	t.Helper()
	res, err := b.Read(context.Background(), storage.EventualConsistency, id)
	require.NoError(t, err)
	return res
}

// parseVersion checks that v is the canonical decimal form of a number and
// returns the number.
func parseVersion(t *testing.T, v string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(v, 10, 64)
	require.NoError(t, err, "version %q is not a decimal number", v)
	require.Equal(t, strconv.FormatUint(n, 10), v, "version %q is not in canonical decimal form", v)
	return n
}

func requireProtoEqual(t *testing.T, want, got proto.Message, msgAndArgs ...any) {
	t.Helper()
	if !proto.Equal(want, got) {
		require.Fail(t, fmt.Sprintf("messages differ\nwant: %s\n got: %s",
			prototext.Format(want), prototext.Format(got)), msgAndArgs...)
	}
}

// withVersion returns a copy of res with the given version, the form
// WriteCAS should store.
func withVersion(res *pbresource.Resource, version string) *pbresource.Resource {
	c := proto.Clone(res).(*pbresource.Resource)
	c.Version = version
	return c
}

// key names a resource by type, tenancy and name (not Uid or GroupVersion).
func key(id *pbresource.ID) string {
	return fmt.Sprintf("%s.%s/%s/%s/%s", id.GetType().GetGroup(), id.GetType().GetKind(),
		id.GetTenancy().GetPartition(), id.GetTenancy().GetNamespace(), id.GetName())
}

// wait waits for ch to be closed or to deliver a value, failing the test
// after the suite's timeout.
func (s *suite) wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	timer := time.NewTimer(s.opts.Timeout)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		require.FailNow(t, "timed out waiting: "+what)
	}
}

func requireErrorIsOneOf(t *testing.T, err error, targets ...error) {
	t.Helper()
	for _, target := range targets {
		if errors.Is(err, target) {
			return
		}
	}
	require.Fail(t, fmt.Sprintf("error %v is none of %v", err, targets))
}
