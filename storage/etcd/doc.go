// Package etcd is Loom's distributed storage backend: a storage.Backend
// kept in an etcd v3 cluster, and a leader Lease for the controller Manager
// built on etcd elections. It is a Go module of its own
// (github.com/loomrt/loom/storage/etcd), so the core module does not depend
// on etcd; a host server imports it when it runs with -storage etcd.
//
// # Storage
//
// New(client) returns a Backend over an etcd client. Each resource is one
// etcd key holding its deterministic protobuf encoding (keys.go describes
// the layout); its Version is the key's mod revision, so versions are
// etcd's store-wide revision and grow with every write of the cluster.
// Writes and deletes are etcd transactions that compare the mod revision
// (and, on the one-round-trip update path, the encoded Id and owner at the
// start of the stored value, which covers the Uid) and update the resource
// and its owner-index entry atomically, so OwnerReferences is a range read
// of the index.
//
// Reads: StrongConsistency is a linearizable etcd read (it goes through the
// raft leader and fails with storage.ErrInconsistent without a quorum);
// EventualConsistency is a serializable read, answered by the member the
// client talks to from its local state. A member may lag; to keep reads
// monotonic for each Backend, the Backend remembers the greatest revision
// it has seen (in any response and in every event its watches handed out),
// and an eventually consistent read answered at an older revision is
// repeated as a linearizable read. A List of more than 5,000 keys is read
// in pages at one revision, each decoded while the next is read (see
// readRange).
//
// WatchList reads a snapshot at one revision and reads the changes from
// the next on from the backend's change feed: one etcd watch over all its
// resources, decoded once into a bounded ring that every watch reads as a
// cursor (see Backend.WatchListSince). Watches end with
// storage.ErrWatchTooSlow when their consumer falls behind the ring, and
// with an error wrapping ErrCompacted when etcd has compacted the history
// they still need.
//
// Errors: storage.ErrInconsistent for reads etcd cannot serve for lack of a
// leader or quorum, and for writes etcd refused without applying them;
// ErrOutcomeUnknown for writes whose fate is unknown (a timeout after the
// request was sent); ErrFenced for writes refused by a fence (WithFence).
//
// # History
//
// A Backend keeps history (storage.Historian) unless New is given
// WithoutHistory, within storage.DefaultHistoryLimits unless given
// WithHistory: a write that changes the Generation, and a deletion, put a
// record of it in their own transaction, under keys beside the resources
// (see history.go), so a committed change is always in the history, even
// if the server dies right after. The goroutine Start starts prunes them to
// the limits in the background (see pruner); a Backend that is not started
// records but does not prune.
//
// # Leader lease
//
// NewLease campaigns for leadership under an election key and implements
// the controller Manager's Lease; see Lease for what it guarantees.
package etcd
