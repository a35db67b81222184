package controller

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/reconcile"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// tokenFix is what to do about a server that refuses the caller for want
// of a token: the same words in the watch's and the worker's log lines.
const tokenFix = "present a token: dial.WithToken when connecting (a controller process: its -token-file flag); " +
	"a token the server does not know is refused alike"

// authRefused reports whether err is the server refusing the caller for
// want of a token or a right: Unauthenticated, PermissionDenied, or
// Consul's answer to a missing or unknown token, Internal "ACL not found".
// err may wrap the status error.
func authRefused(err error) bool {
	switch st, _ := status.FromError(err); st.Code() {
	case codes.Unauthenticated, codes.PermissionDenied:
		return true
	case codes.Internal:
		return strings.Contains(st.Message(), "ACL not found")
	}
	return false
}

// isSetupError reports whether a watch failed for a reason only a change of
// setup can cure: a caller without a token or the right to watch
// (authRefused), a bad request, or a type the server does not know.
func isSetupError(err error) bool {
	if authRefused(err) {
		return true
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.Unimplemented, codes.NotFound:
		return true
	}
	return false
}

// watchFix says what cures a setup error (isSetupError) on the watch of
// typ (a type's string form).
func watchFix(err error, typ string) string {
	switch status.Code(err) {
	case codes.PermissionDenied:
		return "the token lacks list on " + typ + ": grant it list or write on the type (Consul: read)"
	case codes.InvalidArgument, codes.NotFound:
		return "the server must serve " + typ + ": register the type on the server"
	case codes.Unimplemented:
		return "the server does not serve the ResourceService: check the address"
	}
	return tokenFix
}

// writeFix says what cures an authRefused error of a reconcile.
func writeFix(err error) string {
	if status.Code(err) == codes.PermissionDenied {
		return "the token lacks a right this controller needs (the error names it): " +
			"grant it in the server's ACL file (Consul: the token's policy)"
	}
	return tokenFix
}

// sameError reports whether a and b carry the same gRPC code and message:
// for logging a failure once per change, not once per retry.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	sa, sb := status.Convert(a), status.Convert(b)
	return sa.Code() == sb.Code() && sa.Message() == sb.Message()
}

// refusals logs and counts the reconciles of one run of a controller that
// the server refused for want of a token or a right (authRefused): at
// error level with the fix once per change of the gRPC code, not once per
// retry nor per resource (whose names the messages carry), and at info
// once every request refused since has succeeded. Its workers share it.
type refusals struct {
	logger hclog.Logger
	count  *prometheus.CounterVec // by code

	pending atomic.Int32 // len(keys), read without the lock on every success
	mu      sync.Mutex
	logged  error // the refusal logged at error level; nil if none
	keys    map[reconcile.RequestKey]struct{}
}

// failed takes err, the error a reconcile of key returned, and reports
// whether it was a refusal, which it has logged and counted; the caller
// logs any other error itself.
func (r *refusals) failed(key reconcile.RequestKey, err error) bool {
	if !authRefused(err) {
		return false
	}
	code := status.Code(err)
	r.count.WithLabelValues(code.String()).Inc()
	r.mu.Lock()
	if r.keys == nil {
		r.keys = make(map[reconcile.RequestKey]struct{})
	}
	r.keys[key] = struct{}{}
	r.pending.Store(int32(len(r.keys)))
	news := r.logged == nil || status.Code(r.logged) != code
	if news {
		r.logged = err
	}
	r.mu.Unlock()
	if news {
		r.logger.Error("reconcile refused by the server; retrying with backoff", "request", key.String(), "error", err, "fix", writeFix(err))
	} else {
		r.logger.Debug("reconcile refused by the server; retrying with backoff", "request", key.String(), "error", err)
	}
	return true
}

// succeeded notes that a reconcile of key succeeded; a lock-free load
// while no request stands refused.
func (r *refusals) succeeded(key reconcile.RequestKey) {
	if r.pending.Load() == 0 {
		return
	}
	r.mu.Lock()
	delete(r.keys, key)
	r.pending.Store(int32(len(r.keys)))
	var was error
	if len(r.keys) == 0 {
		was, r.logged = r.logged, nil
	}
	r.mu.Unlock()
	if was != nil {
		r.logger.Info("reconciles accepted by the server again", "was", status.Code(was).String())
	}
}
