// Package cache is the controller runtime's shared, indexed, in-memory copy
// of the resources its controllers watch.
//
// A Manager owns one Cache. For every watched type it runs one WatchList
// stream (see Watcher), which fills the cache with the stream's snapshot,
// marks the type primed at EndOfSnapshot, and then applies each change
// before the change is handed to mappers and work queues. When a stream
// breaks, the watcher opens a new one and replaces the type's contents with
// the new snapshot in one step, reporting what changed or vanished meanwhile.
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
// # What the cache keeps, and cloning
//
// The cache keeps the resources it is given as they are, copying nothing: a
// resource stored, sent on a watch or held by the cache is immutable, so the
// message a watch event delivered is the one the cache holds, shared with
// whoever else holds it (an in-process server's storage, say). An update
// stores the new message and drops the old one; nothing in the cache is ever
// changed in place. Each resource costs the cache one small entry (its place
// in the ID map and the index buckets) on top of the message itself.
//
// The cache clones on read: every resource it returns is the caller's own
// copy, so a reconciler that changes what it read (a natural thing to do
// before writing it back) cannot corrupt what other controllers see. Cloning
// on write instead would still hand every reader the same pointer, so one
// careless reader would break the rest; the copy on read is the price of
// that guarantee.
//
// Hot paths that only read, such as mappers, filters and index scans, can
// skip the copy: ListReadOnly and ListIDsReadOnly hand out the cache's own
// stored resources and IDs. What the cache holds is immutable, so reading
// them needs no lock; the caller must never change them, and clones one
// (resource.Clone, resource.CloneID) before changing or keeping it to write.
package cache
