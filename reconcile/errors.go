package reconcile

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

// TerminalError wraps err to say that retrying the request cannot help (the
// resource is invalid, say, until someone changes it). A reconciler that
// returns it, or an error wrapping it, has the error logged and counted as
// a failure (loom_controller_reconcile_errors_total, and
// loom_controller_reconcile_total with result "terminal_error"), but the
// request is not requeued and its backoff is forgotten: the next change to
// the resource, or to what maps to it, reconciles it again. As in
// controller-runtime, errors.Is(err, TerminalError(nil)) reports whether
// err is one; IsTerminalError says the same.
func TerminalError(err error) error { return &terminalError{err: err} }

// IsTerminalError reports whether err is, or wraps, an error made by
// TerminalError.
func IsTerminalError(err error) bool {
	if err == nil {
		return false // without the errors.As below, which allocates
	}
	var t *terminalError
	return errors.As(err, &t)
}

type terminalError struct{ err error }

func (e *terminalError) Error() string {
	if e.err == nil {
		return "terminal error"
	}
	return "terminal error: " + e.err.Error()
}

func (e *terminalError) Unwrap() error { return e.err }

// Is makes every terminal error match TerminalError(nil) in errors.Is.
func (e *terminalError) Is(target error) bool {
	_, ok := target.(*terminalError)
	return ok
}
