package server

import (
	"context"
	"reflect"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// ErrACLsChanged is how a WatchList stream ends when the caller's ACL rules
// changed (see ReauthorizeWatches) but it may still watch: Aborted, which
// tells a client to watch again, under the new rules, and to treat the new
// snapshot as the truth.
var ErrACLsChanged = status.Error(codes.Aborted, "the token's ACL rules changed: watch again")

// watchACLs holds the open WatchList streams of a server with an ACL
// resolver, so that ReauthorizeWatches can check them again: one entry per
// stream, removed when it ends, so it is bounded by the streams the
// server's connection limits allow. Nothing of it runs per event: a stream
// it ends sees its context end, which it checks on every event already.
type watchACLs struct {
	// epoch counts the calls to ReauthorizeWatches, so that a stream that
	// resolved its Authorizer while one ran checks itself again (see add).
	epoch atomic.Uint64

	mu      sync.Mutex
	streams map[*aclWatch]struct{}
}

// aclWatch is an open WatchList stream as ReauthorizeWatches sees it.
type aclWatch struct {
	ctx     context.Context // the stream's, whose metadata holds the token
	authz   resource.Authorizer
	reg     resource.Registered
	tenancy *pbresource.Tenancy
	end     context.CancelCauseFunc // ends the stream with its cause
}

// ReauthorizeWatches checks every open WatchList stream against the ACLs in
// force now, and ends those whose caller's Authorizer has changed: with
// Unauthenticated (or whatever Config.ACLResolver answers) when the token
// is no longer known, PermissionDenied when it may no longer list the type
// in the watched tenancy, and ErrACLsChanged (Aborted) when it still may,
// under other rules. Streams whose callers' rules are unchanged go on.
// Call it whenever the rules behind Config.ACLResolver change (package
// acl's Source.OnReload); an Authorizer that has an Equal method, as
// acl.Authorizer does, tells whether it has, others must be the same
// comparable value. It does nothing without a resolver.
//
// A stream ends at its next event or wait, like at Shutdown; one blocked
// sending to a client that does not read ends when the send does.
func (s *Server) ReauthorizeWatches() {
	if s.resolve == nil {
		return
	}
	s.watchACLs.mu.Lock()
	s.watchACLs.epoch.Add(1)
	streams := make([]*aclWatch, 0, len(s.watchACLs.streams))
	for w := range s.watchACLs.streams {
		streams = append(streams, w)
	}
	s.watchACLs.mu.Unlock()
	for _, w := range streams {
		s.reauthorize(w)
	}
}

// addWatch registers an open stream until the returned func is called.
// epoch is watchACLs.epoch as it was before w.authz was resolved: if
// ReauthorizeWatches has run since, w may hold rules older than those it
// checked, and is checked now.
func (s *Server) addWatch(w *aclWatch, epoch uint64) (remove func()) {
	if s.resolve == nil {
		return func() {}
	}
	s.watchACLs.mu.Lock()
	if s.watchACLs.streams == nil {
		s.watchACLs.streams = make(map[*aclWatch]struct{})
	}
	s.watchACLs.streams[w] = struct{}{}
	stale := s.watchACLs.epoch.Load() != epoch
	s.watchACLs.mu.Unlock()
	if stale {
		s.reauthorize(w)
	}
	return func() {
		s.watchACLs.mu.Lock()
		delete(s.watchACLs.streams, w)
		s.watchACLs.mu.Unlock()
	}
}

// reauthorize ends w when its caller may no longer watch as it does.
func (s *Server) reauthorize(w *aclWatch) {
	authz, err := s.authorizer(w.ctx)
	if err == nil {
		err = aclError(w.reg.AuthorizeList(authz, w.tenancy))
	}
	if err == nil && !sameAuthorizer(w.authz, authz) {
		err = ErrACLsChanged
	}
	if err != nil {
		w.end(err)
	}
}

// sameAuthorizer reports whether cur allows what old does: old says so
// when it has an Equal method, otherwise they must be the same comparable
// value.
func sameAuthorizer(old, cur resource.Authorizer) bool {
	if e, ok := old.(interface {
		Equal(resource.Authorizer) bool
	}); ok {
		return e.Equal(cur)
	}
	v := reflect.ValueOf(old)
	return v.Type() == reflect.TypeOf(cur) && v.Comparable() && old == cur
}
