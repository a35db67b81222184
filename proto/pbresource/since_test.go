package pbresource_test

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
)

func TestSinceVersionRefused(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.OutOfRange, "since_version 9 is ahead of the store"), true},
		{status.Error(codes.InvalidArgument, `since_version "x" is not a version`), true},
		{status.Error(codes.InvalidArgument, "type is missing"), false},
		{status.Error(codes.Unavailable, "since_version"), false},
		{errors.New("since_version"), false},
		{nil, false},
	} {
		if got := pbresource.SinceVersionRefused(c.err); got != c.want {
			t.Errorf("SinceVersionRefused(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
