package selector

import "github.com/loomrt/loom/proto/pbresource"

// WatchFilter turns the events of one WatchList stream (of one type) into
// those of a selector: an Upsert of a matching resource is sent, one of a
// resource that no longer matches becomes a Delete of the resource as now
// stored (at the change's version, so it is a valid resume point), and a
// change to a resource the client does not hold is skipped.
//
// To know what the client holds, it keeps the key of every resource it sent
// as matching (and not since deleted). A resumed stream does not know what
// matched before it resumed, so until a NewSnapshot it sends a Delete for a
// change to a resource it has not sent (the client may hold it from
// before), once per resource, and remembers the keys of those still stored;
// a client ignores a Delete of what it does not hold. Either way it holds
// at most one key per stored resource of the watched type.
type WatchFilter struct {
	sel Selector
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

// NewWatchFilter returns the filter of sel for a stream that starts with a
// snapshot, or, when resumed (since_version), with changes. The server
// filters a watch with a label_selector this way; a client filters again
// with its own, since a Consul server ignores the field (a stream already
// filtered passes unchanged, but for Deletes the client need not see).
// Keep one filter across the streams of one watch that resumes, so that it
// knows what the client holds.
func NewWatchFilter(sel Selector, resumed bool) *WatchFilter {
	f := &WatchFilter{sel: sel, exact: !resumed, matching: make(map[selectionKey]struct{})}
	if resumed {
		f.absent = make(map[selectionKey]struct{})
	}
	return f
}

// Selector returns the selector f applies.
func (f *WatchFilter) Selector() Selector { return f.sel }

// Apply returns the event to deliver for ev, which it may replace (the
// replacement is new, ev is never changed), and false when nothing is to
// be delivered. Not safe for concurrent use.
func (f *WatchFilter) Apply(ev *pbresource.WatchEvent) (*pbresource.WatchEvent, bool) {
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		res := e.Upsert.GetResource()
		k := keyOfID(res.GetId())
		if f.sel.Matches(res.GetMetadata()) {
			f.matching[k] = struct{}{}
			delete(f.absent, k)
			return ev, true
		}
		if !f.leave(k, false) {
			return nil, false
		}
		return &pbresource.WatchEvent{Event: &pbresource.WatchEvent_Delete_{Delete: &pbresource.WatchEvent_Delete{
			Resource: res, Version: res.GetVersion()}}}, true
	case *pbresource.WatchEvent_Delete_:
		return ev, f.leave(keyOfID(e.Delete.GetResource().GetId()), true)
	case *pbresource.WatchEvent_NewSnapshot_:
		f.exact, f.absent = true, nil
		clear(f.matching)
	}
	return ev, true
}

// leave records that the client no longer holds k, and reports whether it
// may have held it until now (and so needs a Delete). A deleted resource
// is forgotten, so that the filter holds keys of stored resources only; a
// resumed stream may then send one more needless Delete if the name comes
// back without matching.
func (f *WatchFilter) leave(k selectionKey, deleted bool) bool {
	_, held := f.matching[k]
	delete(f.matching, k)
	if f.exact {
		return held
	}
	_, absent := f.absent[k]
	if deleted {
		delete(f.absent, k)
	} else {
		f.absent[k] = struct{}{}
	}
	return held || !absent
}
