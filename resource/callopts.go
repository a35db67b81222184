package resource

import "google.golang.org/grpc"

// SharedWatchEvents is a call option for WatchList by which the caller
// promises to treat every event it receives as read-only. An in-process
// client (server.NewInProcessClient) then hands out the server's own
// messages instead of a copy of each event, which is most of the cost of an
// in-process watch. Over a network connection the option has no effect:
// every event is decoded into fresh messages anyway. The controller cache
// uses it; it never changes what it receives.
func SharedWatchEvents() grpc.CallOption { return sharedWatchEvents{} }

type sharedWatchEvents struct{ grpc.EmptyCallOption }

// WantsSharedWatchEvents reports whether opts hold SharedWatchEvents.
func WantsSharedWatchEvents(opts []grpc.CallOption) bool {
	for _, o := range opts {
		if _, ok := o.(sharedWatchEvents); ok {
			return true
		}
	}
	return false
}
