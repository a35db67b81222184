// Package cache is the controller runtime's shared, indexed, in-memory copy
// of the resources its controllers watch.
//
// A Manager owns one Cache. For every watched type it runs one WatchList
// stream, which fills the cache with the stream's snapshot (Replace),
// marks the type primed at EndOfSnapshot, and then applies each change
// before the change is handed to mappers and work queues. When a stream
// breaks, the watcher opens a new one and replaces the type's contents with
// the new snapshot in one step, reporting what changed or vanished meanwhile.
//
// The watcher also records, per type, the store version up to which the
// cache has applied the type's changes (Cache.Applied, Applied.Mark). Store
// versions are global and only grow, so a controller that wrote a resource
// at version v reads its own write once the cache has applied v for the
// resource's type: Applied.Wait tells it when.
//
// # Indexes and queries
//
// Every type has the built-in "id" index (one resource per tenancy and name)
// and "owner" index (resources by their owner's Uid, looked up with
// OwnerKey, so a new owner with an old owner's name does not inherit the old
// owner's resources). Controllers add their own with NewIndex and
// NewMultiIndex; index keys are strings, usually built with Key from an ID or
// Reference. A named Query is a function over the read-only cache that
// controllers register and call by name.
//
// To list what a resource owns, look it up by its ID as read (which carries
// its Uid):
//
//	owned, err := rt.Cache.List(childType, cache.OwnerIndex, cache.OwnerKey(owner.Id))
//
// # Who may change a message
//
// The cache follows the one rule in the resource package doc ("Who may
// change a message"): what it holds is immutable, and it copies only at
// the edge, when a read hands a resource to a reconciler. Get, List and
// the other reads clone, so a reconciler that changes what it read (a
// natural thing to do before writing it back) cannot corrupt what other
// controllers see.
//
// The cache keeps the resources it is given (Upsert, Replace, a watch's
// events) as they are, copying nothing: the message a watch event delivered
// is the one the cache holds, shared with whoever else holds it (an
// in-process server's storage, say). An update stores the new message and
// drops the old one. Each resource costs the cache one small entry (its
// place in the ID map and the index buckets) on top of the message itself.
//
// Hot paths that only read, such as mappers, filters and index scans, can
// skip the copy: ListReadOnly and ListIDsReadOnly hand out the cache's own
// stored resources and IDs, as do the Resource and Old of an Event. Reading
// them needs no lock (an update stores a new resource, never changes the
// old one); clone one (resource.Clone, resource.CloneID) before changing
// it or keeping it to write.
//
// # Typed reads
//
// GetDecoded, GetDecodedByID and ListDecoded return resources with their
// Data decoded as a Go message type (a *resource.Decoded[T]), and their
// ReadOnly twins the same without copies. A stored resource is decoded once,
// on its first typed read, and the decoded message is kept with it (and is
// as immutable as the resource) until an update replaces the resource; the
// copying forms clone it, the ReadOnly forms hand it out.
package cache
