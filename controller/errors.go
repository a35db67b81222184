package controller

import (
	"errors"
	"fmt"
	"time"
)

// RequeueAfterError, returned by a reconciler, asks for the request to run
// again after the given time instead of with backoff. It is not counted as
// a failure.
type RequeueAfterError time.Duration

// Error implements error.
func (e RequeueAfterError) Error() string {
	return fmt.Sprintf("requeue after %s", time.Duration(e))
}

// RequeueAfter returns an error that makes the request run again after d.
func RequeueAfter(d time.Duration) error { return RequeueAfterError(d) }

// RequeueNow returns an error that makes the request run again at once
// (after the current run finishes), without backoff.
func RequeueNow() error { return RequeueAfterError(0) }

func requeueAfter(err error) (time.Duration, bool) {
	var r RequeueAfterError
	if errors.As(err, &r) {
		return time.Duration(r), true
	}
	return 0, false
}
