package controller

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
)

// WatchError is why the Manager's watch of Type last failed. Err is the
// server's answer, a gRPC status error: status.Code and errors.As see
// through a WatchError (and through the errors of WaitPrimed and
// CheckPrimed that hold one). When retrying alone cannot cure it (no
// token, a token without the right, a type the server does not serve),
// its message says what can.
type WatchError struct {
	Type *pbresource.Type
	Err  error
}

func (e *WatchError) Error() string {
	typ := resource.TypeString(e.Type)
	st := status.Convert(e.Err)
	if !isSetupError(e.Err) {
		return fmt.Sprintf("watch of %s failed: %s: %s", typ, st.Code(), st.Message())
	}
	return fmt.Sprintf("watch of %s refused: %s: %s; %s", typ, st.Code(), st.Message(), watchFix(e.Err, typ))
}

func (e *WatchError) Unwrap() error { return e.Err }

// notPrimedError names the types a Manager's cache has not primed and
// holds the last failure (a *WatchError) of those whose watch fails.
type notPrimedError struct {
	types    []string
	failures []error
	// unwatched names the types a cold follower does not watch yet.
	unwatched []string
}

func (e *notPrimedError) Error() string {
	var b strings.Builder
	b.WriteString("types not primed: ")
	b.WriteString(strings.Join(e.types, ", "))
	if len(e.unwatched) > 0 {
		b.WriteString("; ")
		b.WriteString(notWatchedReason)
		b.WriteString(": ")
		b.WriteString(strings.Join(e.unwatched, ", "))
	}
	for _, f := range e.failures {
		b.WriteString("; ")
		b.WriteString(f.Error())
	}
	return b.String()
}

func (e *notPrimedError) Unwrap() []error { return e.failures }

// refused reports whether a watch of an unprimed type is refused with an
// error that retrying alone will not cure.
func (e *notPrimedError) refused() bool {
	for _, f := range e.failures {
		if isSetupError(f) {
			return true
		}
	}
	return false
}

// watchHealth keeps how the Manager's watches fare, per watched type, for
// WaitPrimed, CheckPrimed, the watch-error metric and the log: it logs a
// refusal once per change of it, not once per retry, and its end.
type watchHealth struct {
	errors *prometheus.CounterVec // loom_controller_watch_errors_total{type,code}

	mu      sync.Mutex
	failing map[string]*watchFailure // by the type's string form, while its watch fails
	refused chan struct{}            // closed, and replaced, at every refused attempt
}

// watchFailure is one type's watch since it last failed.
type watchFailure struct {
	last   *WatchError // the error the last attempt ended with
	logged error       // the refusal (isSetupError) last logged at error level; nil if none
}

func newWatchHealth(errors *prometheus.CounterVec) *watchHealth {
	return &watchHealth{errors: errors, failing: make(map[string]*watchFailure), refused: make(chan struct{})}
}

// failed records that a watch of typ ended with err, to be retried in
// retryIn, counts it, and logs it: a refusal (isSetupError) at error level
// with its fix when it differs from the refusal logged last, anything else
// at debug.
func (h *watchHealth) failed(typ *pbresource.Type, err error, retryIn time.Duration, logger hclog.Logger) {
	key := resource.TypeString(typ)
	h.errors.WithLabelValues(key, status.Code(err).String()).Inc()
	refused := isSetupError(err)
	h.mu.Lock()
	f := h.failing[key]
	if f == nil {
		f = &watchFailure{}
		h.failing[key] = f
	}
	if refused {
		close(h.refused) // wakes WaitPrimed
		h.refused = make(chan struct{})
	}
	f.last = &WatchError{Type: typ, Err: err}
	news := refused && !sameError(f.logged, err)
	if news {
		f.logged = err
	}
	h.mu.Unlock()
	switch {
	case news:
		logger.Error("cannot watch type; retrying", "error", err, "fix", watchFix(err, key), "retry_in", retryIn)
	case refused:
		logger.Debug("watch still refused; retrying", "error", err, "retry_in", retryIn)
	default:
		logger.Debug("watch stream ended; re-opening", "error", err, "retry_in", retryIn)
	}
}

// accepted records that the server accepted a watch of typ (it sent an
// event), and logs the end of a refusal logged before.
func (h *watchHealth) accepted(typ *pbresource.Type, logger hclog.Logger) {
	key := resource.TypeString(typ)
	h.mu.Lock()
	f := h.failing[key]
	delete(h.failing, key)
	h.mu.Unlock()
	if f != nil && f.logged != nil {
		logger.Info("watch accepted again", "was", status.Convert(f.logged).Message())
	}
}

// failures returns the last failure of each failing watch of types, and
// the channel failed closes at the next refused attempt.
func (h *watchHealth) failures(types []*pbresource.Type) ([]error, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []error
	for _, t := range types {
		if f := h.failing[resource.TypeString(t)]; f != nil {
			out = append(out, f.last)
		}
	}
	return out, h.refused
}
