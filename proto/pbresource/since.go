package pbresource

import (
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// SinceVersionRefused reports whether err, from WatchList, is the server
// refusing the request's since_version: OutOfRange (a version the store has
// not reached, e.g. it restarted with an empty store) or InvalidArgument
// naming since_version (not a version). A client resuming from a point of
// its own then watches afresh, without since_version.
func SinceVersionRefused(err error) bool {
	switch status.Code(err) {
	case codes.OutOfRange:
		return true
	case codes.InvalidArgument:
		return strings.Contains(status.Convert(err).Message(), "since_version")
	}
	return false
}
