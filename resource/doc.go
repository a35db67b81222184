// Package resource holds the helpers every part of Loom shares over the
// pbresource types: type, tenancy and ID comparison and string forms,
// references, status comparison, name and tenancy validation, ULIDs,
// reserved metadata keys, the gRPC metadata keys clients send (consistency
// mode, fence), the ResponseUnread call option, and the type Registry with
// its hooks.
//
// It depends on nothing but the generated protobuf package (and gRPC, which
// that package uses), so servers, controllers and tests can all use it.
//
// # Who may change a message
//
// This is the one rule for every package of Loom; the others point here.
//
// A message that is stored, sent on a watch, or held by the cache is
// immutable: nobody changes it, neither the code that keeps it nor anyone
// it is handed to. A storage backend returns the messages it stores, a
// WatchList event (in process, the server's own, the same for every
// stream) is read-only for its receiver, and the cache's entries, the
// events it reports and its read-only views are read-only for everyone. An
// update stores a new message; it never changes the old one, so readers
// need no lock.
//
// Copies are made only at the edges, where a message passes to code that
// may change it:
//   - what a client call (Read, Write, WriteStatus, List, ListByOwner,
//     MutateAndValidate) returns is the caller's own: over gRPC it is
//     decoded afresh, and the in-process client copies it (unless the
//     caller passed ResponseUnread, promising to read nothing of it but
//     the version: then nothing is copied, and its resource is the
//     stored, immutable one);
//   - what a cache read (Get, List, GetDecoded, ...) hands a reconciler is
//     its own copy, unless it asks for a read-only view (ListReadOnly,
//     ListIDsReadOnly, the ReadOnly typed reads, reconcile.DecodedReadOnly).
//
// Read-only too, since they come from the cache without a copy: the
// resource a dependency mapper gets, and the ID of a reconcile.Request.
//
// Requests go the other way: the server never changes a request and never
// keeps any part of it, so a caller may reuse a request once the call
// returns.
//
// To change or keep for writing a message that came from anywhere else,
// clone it first (Clone, CloneID).
//
// # Registering types
//
// A type is registered with Register (or MustRegister) and a
// Registration[T], which names the Go message of its Data once; its hooks
// receive the resource with its Data decoded, a *Decoded[T]. There is no
// separate untyped form: a type known only at run time (a dynamicpb message
// built from a descriptor) is a Registration[proto.Message] with its
// Message field set. A Registry holds types as Registered values, with the
// message type erased, which is how the server runs their hooks.
package resource
