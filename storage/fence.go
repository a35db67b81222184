package storage

import (
	"context"
	"errors"
)

// ErrFenced means a write or delete made under a Fence (see WithFence) was
// refused because the fence no longer holds: the leadership term it names
// has ended. Nothing was written. Unlike ErrCASFailure, trying again cannot
// help; the writer has lost leadership and should stop.
var ErrFenced = errors.New("write fenced: the leadership term it was made under has ended")

// Fence names a leadership term: a key in the store and the revision that
// created it. A backend that supports fencing makes a write carrying a
// Fence (WriteCAS and DeleteCAS under a context from WithFence) in the
// same atomic step as a check that Key still exists with create revision
// Revision, and fails it with ErrFenced otherwise. A leader whose term
// ended can then no longer change anything, however late its writes
// arrive: the check and the write cannot be separated by the election of
// a new leader.
//
// Fencing is optional. The etcd backend (storage/etcd) honours fences,
// with the leader key of its leader Lease; the in-memory backend ignores
// them, since one process is its only writer and there is no other leader
// to fence off. Reads, lists and watches ignore fences in every backend.
type Fence struct {
	// Key is the store key whose existence is the term: for etcd, the
	// election key the leader created.
	Key string
	// Revision is the store revision that created Key; a key with the same
	// name created later is another term.
	Revision int64
}

type fenceContextKey struct{}

// WithFence returns a context under which a fencing backend's WriteCAS and
// DeleteCAS succeed only while f holds (see Fence).
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceContextKey{}, f)
}

// FenceFrom returns the Fence WithFence put on ctx, if any.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceContextKey{}).(Fence)
	return f, ok
}

// ErrInvalidFence means a Fence names a key that is not one of the
// backend's leader keys. Nothing was read or written: a backend that
// fences refuses such a fence before it looks at its store, so fences
// cannot be used to probe which keys exist.
var ErrInvalidFence = errors.New("fence: not a leader key of this store")

// FenceChecker is implemented by a backend that fences. CheckFence returns
// an error wrapping ErrInvalidFence when f cannot name one of the backend's
// leadership terms (for etcd, a key other than its leader keys); WriteCAS
// and DeleteCAS refuse such a fence the same way.
type FenceChecker interface {
	CheckFence(f Fence) error
}
