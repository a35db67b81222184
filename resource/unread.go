package resource

import "google.golang.org/grpc"

// ResponseUnread returns a call option for Write and WriteStatus by which
// the caller promises not to read the response beyond the resource's
// Version: a client may then return a response whose resource holds only
// its Version, and skip the copy it would otherwise make for the caller.
// The in-process client honours it; a gRPC connection ignores it (the
// response is decoded from the wire anyway), so code that wraps a client
// must not count on either. (The Version stays because the controller
// runtime's client wrapper reads it: a reconcile waits for the cache to
// reach the versions it wrote.)
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
