package storage

import (
	"context"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
)

// Change says who made a write or deletion, for its Revision. The
// ResourceService puts it on the context of its backend calls with
// WithChange; a Historian reads it with ChangeFrom. A write without one is
// recorded with empty By.
type Change struct {
	// By names the identity that made the change: the ACL token's name
	// when ACLs are on, else empty.
	By string

	// CascadeFrom, on a deletion, is the owner whose deletion removed the
	// resource (the reaper's cascade), with its Uid; nil for a deletion a
	// client asked for.
	CascadeFrom *pbresource.ID
}

type changeContextKey struct{}

// WithChange returns a context under which a Historian records c as the
// author of WriteCAS, WriteStatusCAS and DeleteCAS calls.
func WithChange(ctx context.Context, c Change) context.Context {
	return context.WithValue(ctx, changeContextKey{}, c)
}

// ChangeFrom returns the Change WithChange put on ctx; the zero Change if
// none.
func ChangeFrom(ctx context.Context) Change {
	c, _ := ctx.Value(changeContextKey{}).(Change)
	return c
}

// Revision is one recorded state of a resource: what a write stored, or
// what a deletion removed.
type Revision struct {
	// Resource is the resource as stored at Version (for a deletion, as last
	// stored before it: its Version is the last write's). Shared and
	// read-only, like everything a Backend returns.
	Resource *pbresource.Resource

	// Version is the store version of the change: the write's, or the
	// deletion's.
	Version string

	// Time is when the backend committed the change (the backend's clock).
	Time time.Time

	// By and CascadeFrom are the change's Change.
	By          string
	CascadeFrom *pbresource.ID

	// Deleted says the change was a deletion.
	Deleted bool

	// Created says the change created the resource: the first revision of
	// its lifetime (its Uid).
	Created bool
}

// HistoryLimits bounds what a Historian keeps. Backends take it as an
// option (WithHistory) and keep history with DefaultHistoryLimits unless
// told otherwise (WithoutHistory turns it off, for a benchmark's baseline). A zero field means the
// default (DefaultHistoryLimits); a negative one, no bound.
type HistoryLimits struct {
	// KeepVersions is how many write revisions are kept per name (the
	// deletion revisions of its lifetimes are kept by the trash bounds).
	// The write revisions of a deleted lifetime are pruned with its
	// deletion revision, so that the history of deleted names is bounded
	// by the trash bounds too.
	KeepVersions int

	// TrashRetention is how long a deletion revision is kept.
	TrashRetention time.Duration

	// TrashPerType is how many deletion revisions are kept per type (and
	// store), the newest first.
	TrashPerType int
}

// DefaultHistoryLimits are the bounds a zero HistoryLimits field takes: 20
// versions per name (as Grafana's versions_to_keep), 30 days in the trash,
// 10,000 deleted resources per type.
var DefaultHistoryLimits = HistoryLimits{KeepVersions: 20, TrashRetention: 30 * 24 * time.Hour, TrashPerType: 10000}

// RevisionPageRequest says which page of revisions ListRevisions returns.
type RevisionPageRequest struct {
	// Before, when not empty, starts the page at the newest revision older
	// than that version (a previous page's Next).
	Before string

	// Limit is the most revisions the page holds; 0 means no limit.
	Limit int
}

// RevisionPage is one page of revisions, newest first.
type RevisionPage struct {
	Revisions []Revision

	// Next, when not empty, is where the next page starts
	// (RevisionPageRequest.Before).
	Next string
}

// Historian is a Backend that keeps, beside what it stores, the past of every resource: a
// Revision for each committed write that changed the resource's Generation
// (a create, or a change of data or metadata: an owner never changes), and one for each
// deletion. Status-only writes (WriteStatusCAS, or a WriteCAS keeping the
// stored Generation) add nothing, so a controller rewriting its status
// cannot flood the history.
//
// A Revision is recorded in the same atomic step as the write or deletion
// it describes (the same etcd transaction, the same lock in memory): a
// Revision always names a committed version, and every committed change of
// generation has its Revision until it is pruned. The deletion's Revision
// is also the resource's entry in the trash of its type.
//
// Bounds (HistoryLimits) are enforced in the background: pruning never
// blocks or fails a write, so a name may briefly hold more than
// KeepVersions revisions, and the trash more than its bounds.
//
// The history service uses a Historian when the backend is one; the
// ResourceService and the runtime never depend on it.
type Historian interface {
	// ReadRevision returns the revision of the name id gives (its Uid, when
	// set, must match the revision's resource) recorded at version: a
	// write's or a deletion's. ErrNotFound when none is kept.
	ReadRevision(ctx context.Context, id *pbresource.ID, version string) (Revision, error)

	// ListRevisions returns the kept revisions of the name id gives, of
	// every lifetime (id.Uid ignored), newest first.
	ListRevisions(ctx context.Context, id *pbresource.ID, req RevisionPageRequest) (RevisionPage, error)

	// ListTrash returns the kept deletion revisions of a type in tenancy
	// (fields may be Wildcard) whose names start with namePrefix, newest
	// deletion first.
	ListTrash(ctx context.Context, resType UnversionedType, tenancy *pbresource.Tenancy, namePrefix string, req RevisionPageRequest) (RevisionPage, error)

	// ListTrashOwnedBy returns the kept deletion revisions of resources
	// whose Owner was owner (matched with its Uid, which must be set; the
	// GroupVersion is ignored), of any type, newest deletion first: what a
	// restore of the owner with its owned resources brings back.
	ListTrashOwnedBy(ctx context.Context, owner *pbresource.ID, req RevisionPageRequest) (RevisionPage, error)
}
