package server

import (
	"strings"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/selector"
)

// parseSelector parses a request's label_selector, or returns an
// InvalidArgument status naming the field.
func parseSelector(raw string) (selector.Selector, error) {
	sel, err := selector.Parse(raw)
	if err != nil {
		return sel, invalidField("label_selector", "%s", strings.TrimPrefix(err.Error(), "label selector: "))
	}
	return sel, nil
}

// selectorHash folds a selector's canonical form into a page token's query
// hash, so that a token is refused for another selector. An empty selector
// leaves the hash unchanged (tokens issued without one stay valid).
func selectorHash(hash uint64, sel selector.Selector) uint64 {
	if sel.Empty() {
		return hash
	}
	for _, c := range []byte(sel.String()) {
		hash ^= uint64(c)
		hash *= 1099511628211 // FNV-1a's 64-bit prime
	}
	return hash
}

// selection turns one WatchList stream's events into the events of its
// label selector: an Upsert of a matching resource is sent, one of a
// resource that no longer matches becomes a Delete of the resource as now
// stored (at the change's version, so it is a valid resume point), and a
// change to a resource the client does not hold is skipped.
//
// To know what the client holds, it keeps the key of every resource it sent
// as matching (and not since deleted): at most one entry per resource of
// the watched type, and never more than the stream sent. A resumed stream
// does not know what matched before it resumed, so until a NewSnapshot it
// sends a Delete for a non-matching change to a resource it has not sent
// (the client may hold it from before), once per resource, and remembers
// those keys too; a client ignores a Delete of what it does not hold.
type selection struct {
	sel selector.Selector
	// exact is set when the stream's snapshot (not a resume) defines what
	// the client holds: then a key not in matching is not held.
	exact    bool
	matching map[selectionKey]struct{}
	// absent holds, while not exact, the keys the client is known not to
	// hold (it was sent their Delete).
	absent map[selectionKey]struct{}
}

// selectionKey identifies a resource within a watch's type. Its strings
// share the stored resource's memory.
type selectionKey struct{ partition, namespace, name string }

func keyOfID(id *pbresource.ID) selectionKey {
	t := id.GetTenancy()
	return selectionKey{t.GetPartition(), t.GetNamespace(), id.GetName()}
}

// newSelection returns the selection of sel for a stream that starts with
// a snapshot, or, when resumed, with changes.
func newSelection(sel selector.Selector, resumed bool) *selection {
	f := &selection{sel: sel, exact: !resumed, matching: make(map[selectionKey]struct{})}
	if resumed {
		f.absent = make(map[selectionKey]struct{})
	}
	return f
}

// apply returns the event to send for ev, which it may replace, and false
// when nothing is to be sent.
func (f *selection) apply(ev *pbresource.WatchEvent) (*pbresource.WatchEvent, bool) {
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		res := e.Upsert.GetResource()
		k := keyOfID(res.GetId())
		if f.sel.Matches(res.GetMetadata()) {
			f.matching[k] = struct{}{}
			delete(f.absent, k)
			return ev, true
		}
		if !f.leave(k) {
			return nil, false
		}
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Delete_{Delete: &pbresource.WatchEvent_Delete{
			Resource: res, Version: res.GetVersion()}}}, true
	case *pbresource.WatchEvent_Delete_:
		return ev, f.leave(keyOfID(e.Delete.GetResource().GetId()))
	case *pbresource.WatchEvent_NewSnapshot_:
		f.exact, f.absent = true, nil
		clear(f.matching)
	}
	return ev, true
}

// leave records that the client no longer holds k, and reports whether it
// may have held it until now (and so needs a Delete).
func (f *selection) leave(k selectionKey) bool {
	if _, ok := f.matching[k]; ok {
		delete(f.matching, k)
		if !f.exact {
			f.absent[k] = struct{}{}
		}
		return true
	}
	if f.exact {
		return false
	}
	if _, ok := f.absent[k]; ok {
		return false
	}
	f.absent[k] = struct{}{}
	return true
}
