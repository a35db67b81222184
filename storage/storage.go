// Package storage defines the contract between the ResourceService and the
// store that keeps resources: the Backend and Watch interfaces, the sentinel
// errors, and the rules every implementation follows. The conformance suite
// in storage/conformance checks those rules; storage/inmem is the default
// implementation.
//
// # Ownership of messages
//
// Backends follow Loom's one rule, "Who may change a message" in the
// resource package doc: what is stored is immutable. A Backend never keeps
// or changes a message the caller passed in (it copies what it stores), and
// what it returns (from Read, List, WriteCAS and watch events) is the
// stored message itself, shared with the backend and every other caller.
// This keeps reads and watch fan-out free of copies. The one exception is
// the status handed to StatusWriter.WriteStatusCAS, which its caller makes
// for the purpose and hands over.
//
// # Uids
//
// Names are chosen by users and may be reused after a delete; the Uid, a
// ULID set by the ResourceService at creation, tells the lifetimes apart.
//
// # GroupVersion
//
// Types with the same Group and Kind but a different GroupVersion name the
// same stored resource. Only one form is stored at a time; writes may replace
// one form with another.
//
// # Read-modify-write
//
// Every Backend write is a compare-and-swap on Version. Unconditional writes
// are built above the backend (in the ResourceService) as read, modify,
// WriteCAS, retried on ErrCASFailure, which is also how Status and Uid are
// carried over without the backend knowing about partial updates.
package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
)

// Wildcard, in a Tenancy field of List or WatchList, matches every value of
// that unit.
const Wildcard = "*"

var (
	// ErrNotFound means no resource is stored under the given ID (or none
	// with the given Uid).
	ErrNotFound = errors.New("resource not found")

	// ErrCASFailure means the version given to a CAS operation is not the
	// stored version.
	ErrCASFailure = errors.New("CAS operation failed because the given version doesn't match what is stored")

	// ErrWrongUid means the Uid given to a write is not the stored resource's
	// Uid: the caller is addressing a different lifetime of the name.
	ErrWrongUid = errors.New("write failed because the given uid doesn't match what is stored")

	// ErrInconsistent means the backend could not give the consistency the
	// operation needs, e.g. it lost quorum.
	ErrInconsistent = errors.New("cannot satisfy consistency requirements")

	// ErrTooLarge means the backend refused a write because the resource
	// (or the request carrying it) is bigger than the store accepts, e.g.
	// over etcd's --max-request-bytes. Nothing was written.
	ErrTooLarge = errors.New("the resource is too large for the storage backend")

	// ErrOutcomeUnknown means a write was sent to the store but no answer
	// came back (a timeout, a lost connection, a leader lost while it was
	// in flight): it may or may not have been applied. Read the resource
	// to find out: its version tells whether the write landed.
	ErrOutcomeUnknown = errors.New("outcome unknown: the write may or may not have been applied")

	// ErrOwnerNotFound means a write gives the resource an owner that is not
	// stored (or not with the owner's Uid): an owner must exist when its
	// resources are created, checked in the same atomic step as the write.
	ErrOwnerNotFound = errors.New("the resource's owner does not exist")

	// ErrWatchClosed is returned by Watch.Next after Close.
	ErrWatchClosed = errors.New("watch closed")

	// ErrWatchTooSlow ends a watch whose consumer fell so far behind that the
	// backend stopped buffering for it. The consumer should start a new
	// WatchList (and treat its snapshot as the new truth). Events still
	// buffered for the watch may be discarded.
	ErrWatchTooSlow = errors.New("watch ended: the consumer could not keep up with the event rate")

	// ErrInvalidVersion means a watch was asked to resume from a version
	// that is not a store version (not a decimal number).
	ErrInvalidVersion = errors.New("not a store version")

	// ErrFutureVersion means a watch was asked to resume from a version
	// greater than the store's current version: one this store never
	// issued (e.g. it restarted empty). The caller should watch afresh.
	ErrFutureVersion = errors.New("version is ahead of the store's current version")

	// ErrVersionGone means a paged List asked for a version the store no
	// longer keeps (compacted, or out of the in-memory event log). The
	// caller should list again from the first page.
	ErrVersionGone = errors.New("the store no longer has the version the listing is at")
)

// ReadConsistency is the guarantee a read asks for.
type ReadConsistency int

const (
	// EventualConsistency gives monotonic reads: on one server, a read never
	// returns older data than an earlier read or an event already delivered
	// by WatchList. It may miss recent writes. This is the cheap default.
	EventualConsistency ReadConsistency = iota

	// StrongConsistency gives linearizable reads: the result reflects every
	// write that completed before the read started.
	StrongConsistency
)

// String returns a readable name of the consistency level.
func (c ReadConsistency) String() string {
	switch c {
	case EventualConsistency:
		return "eventual"
	case StrongConsistency:
		return "strong"
	}
	return fmt.Sprintf("ReadConsistency(%d)", int(c))
}

// Backend is the store behind the ResourceService. Implementations must be
// safe for concurrent use.
type Backend interface {
	// Read returns the resource stored under id.
	//
	// An empty id.Uid matches whatever is stored under the name; a non-empty
	// one must equal the stored Uid, else ErrNotFound.
	//
	// When the stored resource's GroupVersion differs from
	// id.Type.GroupVersion, Read returns a GroupVersionMismatchError holding
	// the stored resource.
	Read(ctx context.Context, consistency ReadConsistency, id *pbresource.ID) (*pbresource.Resource, error)

	// WriteCAS stores res if res.Version equals the stored version, where an
	// empty version means "must not exist yet"; otherwise ErrCASFailure. On
	// success it returns the stored copy with its new Version: a decimal
	// rendering of a store-wide revision that grows with every write.
	//
	// A non-empty res.Id.Uid that differs from the stored Uid gives
	// ErrWrongUid; an empty one on an update keeps the stored Uid. A create
	// (empty version) over an existing resource is ErrCASFailure whatever
	// the Uids. The GroupVersion is not checked: a write may replace the
	// stored form with another version of the type.
	//
	// A write that gives the resource an owner (a create with res.Owner, or
	// an update that changes it) succeeds only if the owner is stored, with
	// res.Owner.Uid when that is not empty, at the moment the write commits;
	// otherwise ErrOwnerNotFound and nothing is written. Together with
	// DeleteCAS's tombstone this closes the race between creating a
	// resource and deleting its owner: a resource is either refused or
	// found by OwnerReferences once its owner is gone.
	//
	// ErrInconsistent means the write could not be made safely (e.g. no
	// quorum); it was not applied. ErrOutcomeUnknown means it was sent but
	// not confirmed: it may have been applied.
	WriteCAS(ctx context.Context, res *pbresource.Resource) (*pbresource.Resource, error)

	// DeleteCAS deletes the resource stored under id if version equals the
	// stored version (an empty version deletes whatever is stored);
	// otherwise ErrCASFailure. Deleting what does not exist, or a resource
	// whose Uid differs from a non-empty id.Uid, does nothing and succeeds.
	// The GroupVersion of id is ignored.
	//
	// With WithTombstone, the deletion also stores the given tombstone when
	// the resource owns others at the moment it is deleted, in the same
	// atomic step: either both happen or neither does.
	DeleteCAS(ctx context.Context, id *pbresource.ID, version string, opts ...DeleteOption) error

	// List returns the resources of a type (any GroupVersion: callers check
	// and translate) in tenancy, whose names start with namePrefix. Tenancy
	// fields may be Wildcard. Results are ordered by tenancy then name.
	// Only EventualConsistency must be supported.
	List(ctx context.Context, consistency ReadConsistency, resType UnversionedType, tenancy *pbresource.Tenancy, namePrefix string) ([]*pbresource.Resource, error)

	// WatchList watches the resources List would return. The Watch first
	// yields an Upsert for each matching resource (the snapshot), then
	// exactly one EndOfSnapshot, then an Upsert or Delete for each change
	// after the snapshot, in commit order, with no gap and no duplicate.
	//
	// Events may be late but never out of order, and Read never returns
	// older data than the newest event delivered (monotonic reads across
	// Read and WatchList, on one backend instance). A Delete event carries
	// the resource as last stored, with its last Version.
	//
	// ctx bounds only the call; the watch lives until Close or until it
	// ends with an error. Next is meant for one goroutine at a time. A nil
	// tenancy means empty partition and namespace, not a wildcard.
	WatchList(ctx context.Context, resType UnversionedType, tenancy *pbresource.Tenancy, namePrefix string) (Watch, error)

	// OwnerReferences returns the IDs of the resources whose Owner is id
	// (matched with Uid; the GroupVersion is ignored). Results may be stale but are monotonic with
	// WatchList: once a watch reported the owner's deletion, the result
	// holds every resource the owner had at that point, which is every
	// resource it will ever have, since WriteCAS refuses new ones
	// (ErrOwnerNotFound).
	OwnerReferences(ctx context.Context, id *pbresource.ID) ([]*pbresource.ID, error)
}

// WatchOptions are what WatchListSince asks for beyond WatchList's query.
type WatchOptions struct {
	// SinceVersion, when not empty, resumes a watch after that store
	// version (see ResumableBackend).
	SinceVersion string

	// BookmarkInterval, when positive, asks for a Bookmark event whenever
	// the watch has had nothing to deliver for that long.
	BookmarkInterval time.Duration
}

// ResumableBackend is a Backend whose watches can resume from a version and
// report their position with bookmarks. The server uses it when the backend
// implements it; otherwise a resume is answered with a fresh snapshot.
type ResumableBackend interface {
	Backend

	// WatchListSince is WatchList with opts.
	//
	// With an empty SinceVersion the watch is WatchList's. Otherwise, when
	// the backend still has every change after SinceVersion, the watch
	// yields only those changes that match, in commit order, with no
	// snapshot and no EndOfSnapshot. When it no longer has them, the watch
	// first yields a NewSnapshot event, then WatchList's snapshot,
	// EndOfSnapshot and changes. A SinceVersion that is not a decimal
	// number gives ErrInvalidVersion, one greater than the store's current
	// version ErrFutureVersion; either is returned by this call, before any
	// event.
	//
	// With a positive BookmarkInterval, whenever the watch has delivered
	// everything up to the store's current version and then nothing for
	// the interval, Next yields a Bookmark event holding a version V such
	// that every matching change up to V was delivered: SinceVersion = V
	// resumes with no gap and no duplicate. Bookmarks come only after the
	// snapshot.
	//
	// Delete and EndOfSnapshot events carry their store version (the
	// deletion's, the snapshot's), so that any event's version is a resume
	// point.
	WatchListSince(ctx context.Context, resType UnversionedType, tenancy *pbresource.Tenancy, namePrefix string, opts WatchOptions) (Watch, error)
}

// DeleteOption modifies a DeleteCAS call.
type DeleteOption func(*DeleteOptions)

// DeleteOptions are what a DeleteCAS call's options ask for. Backends read
// them with NewDeleteOptions.
type DeleteOptions struct {
	// Tombstone, when not nil, returns the tombstone to store if the
	// deleted resource owns others (see WithTombstone).
	Tombstone func() (*pbresource.Resource, error)

	// MustExist makes a delete of nothing a CAS failure (see MustExist).
	MustExist bool
}

// MustExist makes DeleteCAS fail with ErrCASFailure when nothing is stored
// under the ID (with its Uid, if the ID has one), instead of succeeding
// with nothing to do: for a caller that read the resource and must learn
// whether its delete, not someone else's, removed it.
func MustExist() DeleteOption { return func(o *DeleteOptions) { o.MustExist = true } }

// NewDeleteOptions applies opts to zero DeleteOptions.
func NewDeleteOptions(opts ...DeleteOption) DeleteOptions {
	var o DeleteOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithTombstone asks DeleteCAS to store a tombstone in the same atomic step
// as the deletion if the deleted resource owns any resource at that moment;
// nothing is stored for a resource that owns nothing. newTombstone returns
// the tombstone, a resource to create (empty Version, Uid set); backends
// call it at most once, only when they may need it, possibly while holding
// their locks, so it must only build the message. If a resource is already
// stored under the tombstone's ID, it is left as it is. The backend copies
// what newTombstone returns or uses it as its own; the caller must not keep
// it.
func WithTombstone(newTombstone func() (*pbresource.Resource, error)) DeleteOption {
	return func(o *DeleteOptions) { o.Tombstone = newTombstone }
}

// Watch is a stream of events from Backend.WatchList.
type Watch interface {
	// Next blocks until the next event, ctx is done, or the watch ends. After
	// an error the watch is finished and should be closed.
	Next(ctx context.Context) (*pbresource.WatchEvent, error)

	// Close stops the watch and releases what it holds. It is safe to call
	// more than once and concurrently with Next.
	Close()
}

// WatchStats is a count of a backend's watches at one moment, for metrics.
// Backends that count their watches have a WatchStats method returning it.
type WatchStats struct {
	// Open is how many watches are running: neither closed nor ended for
	// falling behind.
	Open int
	// Buffered is how many changes, summed over the open watches, wait to
	// be handed to their consumers (snapshots not counted): where the
	// watches share one event log (both backends), the log entries a watch
	// has not read yet, other types' included, which are not memory of its
	// own, plus what a watch holds of its own (etcd: one catching up from
	// etcd's history).
	Buffered int
	// Dropped is how many watches have been ended with ErrWatchTooSlow
	// since the backend was made.
	Dropped uint64
}

// UnversionedType is a resource type without its GroupVersion: the identity
// under which resources are stored (resource.UnversionedType, named here too
// for the backends).
type UnversionedType = resource.UnversionedType

// UnversionedTypeFrom drops the GroupVersion of t.
func UnversionedTypeFrom(t *pbresource.Type) UnversionedType {
	return resource.UnversionedTypeFrom(t)
}

// GroupVersionMismatchError is returned by Read when the resource is stored
// under a different GroupVersion than the one asked for.
type GroupVersionMismatchError struct {
	// RequestedType is the type given to Read.
	RequestedType *pbresource.Type

	// Stored is the resource in its stored form.
	Stored *pbresource.Resource
}

// Error implements error.
func (e GroupVersionMismatchError) Error() string {
	return fmt.Sprintf("resource was requested with GroupVersion=%q, but stored with GroupVersion=%q",
		e.RequestedType.GetGroupVersion(), e.Stored.GetId().GetType().GetGroupVersion())
}

// PageKey is a resource's place within a listing: its partition, namespace
// and name, after its type in a listing of several types (an owner's
// resources). A page ends at one, and the next page starts after it.
type PageKey struct {
	// Type is the resource's type in an owner listing
	// (OwnerPagedLister); empty in a listing of one type (PagedLister),
	// whose keys ignore it.
	Type UnversionedType

	Partition, Namespace, Name string
}

// PageKeyOf returns the place of id within its type (Type left empty).
func PageKeyOf(id *pbresource.ID) PageKey {
	t := id.GetTenancy()
	return PageKey{Partition: t.GetPartition(), Namespace: t.GetNamespace(), Name: id.GetName()}
}

// OwnedPageKeyOf returns the place of id in an owner listing: its type,
// then its place within the type.
func OwnedPageKeyOf(id *pbresource.ID) PageKey {
	k := PageKeyOf(id)
	k.Type = UnversionedTypeFrom(id.GetType())
	return k
}

// PageRequest says which page ListPage returns.
type PageRequest struct {
	// Version is the version to list at; empty means the current one,
	// which the Page reports (the first page of a listing).
	Version string

	// After, when not nil, starts the page after that key (a previous
	// page's Last); nil starts at the first resource.
	After *PageKey

	// Limit is the most resources the page holds; 0 means no limit.
	Limit int

	// Labels, when selective, lets the backend leave out resources whose
	// metadata cannot match a label selector. It is a hint: a backend may
	// ignore it, and the caller still checks what it gets with the
	// selector's Matches.
	Labels selector.Prefilter
}

// Page is one page of a paged listing.
type Page struct {
	// Resources are the page's resources, shared and read-only like List's.
	Resources []*pbresource.Resource

	// Version is the version every page of the listing is consistent at.
	Version string

	// Last is where the next page starts (its PageRequest.After), set when
	// More is: the last key the backend looked at, which may be past the
	// last resource returned.
	Last PageKey

	// More says that resources may follow Last. A page may hold fewer than
	// Limit resources, even none, while More is set.
	More bool
}

// PagedLister is a Backend that lists in pages consistent at one version.
// The server uses it when the backend implements it; otherwise a paged List
// is answered in one page.
type PagedLister interface {
	// ListPage returns the resources List would have returned at
	// req.Version whose keys follow req.After, up to req.Limit.
	//
	// Pages follow the backend's key order, which is List's order except
	// that a backend may order tenancy units bytewise on their joined key
	// (e.g. etcd puts namespace "a-b" before "a"); paging with After and
	// Last visits every resource exactly once whatever the order. A
	// Version the store no longer has gives ErrVersionGone, one it never
	// issued ErrFutureVersion, one that is not a version ErrInvalidVersion.
	ListPage(ctx context.Context, resType UnversionedType, tenancy *pbresource.Tenancy, namePrefix string, req PageRequest) (Page, error)
}

// OwnerPagedLister is a Backend that lists the resources an owner owns in
// pages consistent at one version, as PagedLister lists a type. The server
// uses it for a paged ListByOwner when the backend implements it;
// otherwise such a ListByOwner is answered in one page.
type OwnerPagedLister interface {
	// ListOwnedPage returns the resources whose Owner was owner (matched
	// with its Uid, which must be set; the GroupVersion is ignored) at
	// req.Version, as stored then, whose keys follow req.After, up to
	// req.Limit. The keys are OwnedPageKeyOf's: the owned resources may
	// be of any type.
	//
	// Pages follow the backend's key order, by type (Group, Kind), then
	// tenancy and name, except that a backend may order the parts
	// bytewise on their joined key (as ListPage may); paging with After
	// and Last visits every owned resource exactly once whatever the
	// order. The first page (empty Version) is at least as recent as the
	// backend's monotonic reads (see OwnerReferences). Errors are
	// ListPage's: ErrVersionGone, ErrFutureVersion, ErrInvalidVersion.
	ListOwnedPage(ctx context.Context, owner *pbresource.ID, req PageRequest) (Page, error)
}

// StatusWriter is a Backend that writes one status of a stored resource
// without the caller building the new resource. The server uses it for
// WriteStatus when the backend implements it, and WriteCAS otherwise.
type StatusWriter interface {
	// WriteStatusCAS stores stored with its status under key set to
	// status, if stored is still what the backend stores under its name:
	// the message itself, as Read, List, WriteCAS or a watch event returned
	// it (not a copy). Otherwise it returns ErrCASFailure. On success it
	// returns the new stored resource, as WriteCAS does; it shares with
	// stored every part but the status map. A backend that fences (see
	// Fence) checks the fence as WriteCAS does.
	//
	// Unlike WriteCAS, it does not copy its input: status is handed over.
	// It must be the caller's own (a deep copy it made, sharing nothing
	// with a request), and once a call succeeds it is stored, so the caller
	// never changes it again.
	WriteStatusCAS(ctx context.Context, stored *pbresource.Resource, key string, status *pbresource.Status) (*pbresource.Resource, error)
}

// WithStatus returns the resource a status write stores: stored with status
// under key. It shares every part of stored but the status map, which is
// new, so neither stored nor the result may be modified.
func WithStatus(stored *pbresource.Resource, key string, status *pbresource.Status) *pbresource.Resource {
	statuses := make(map[string]*pbresource.Status, len(stored.Status)+1)
	for k, v := range stored.Status {
		statuses[k] = v
	}
	statuses[key] = status
	return &pbresource.Resource{
		Id:         stored.Id,
		Owner:      stored.Owner,
		Data:       stored.Data,
		Version:    stored.Version,
		Generation: stored.Generation,
		Metadata:   stored.Metadata,
		Status:     statuses,
	}
}
