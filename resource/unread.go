package resource

import "google.golang.org/grpc"

// ResponseUnread returns a call option for Write and WriteStatus by which
// the caller promises to read nothing of the response but the resource's
// Version, and to change nothing of it: a client may then skip the copy it
// would otherwise make for the caller and return a resource that is not the
// caller's own (the in-process client returns the stored message itself,
// which is immutable). A gRPC connection ignores it (the response is decoded
// from the wire anyway), so code that wraps a client must not count on
// either. (The Version is readable because the controller runtime's client
// wrapper reads it: a reconcile waits for the cache to reach the versions it
// wrote.)
//
// It changes nothing on the server: what is stored and sent on watches is
// the same. reconcile.Runtime.WriteStatus, which reports only whether it
// wrote, passes it.
func ResponseUnread() grpc.CallOption { return responseUnread{} }

// responseUnread is the option ResponseUnread returns.
type responseUnread struct{ grpc.EmptyCallOption }

// IsResponseUnread reports whether opts hold ResponseUnread.
func IsResponseUnread(opts []grpc.CallOption) bool {
	for _, o := range opts {
		if _, ok := o.(responseUnread); ok {
			return true
		}
	}
	return false
}
