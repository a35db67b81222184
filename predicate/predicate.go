// Package predicate holds event filters for controllers, in the spirit of
// controller-runtime's pkg/predicate: a Predicate looks at one change the
// cache applied and says whether the controller should hear of it. A
// controller opts in per type with controller.Controller.WithEventFilter;
// without filters every change is queued (managed type) or mapped (watched
// type).
//
// Predicates run on the cache's watch goroutine, once per change and
// controller, before anything is queued: keep them fast, never block, and
// never change the resources they are shown.
package predicate

import (
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Predicate reports whether a change passes the filter (true: queue or map
// it). Any func(cache.Event) bool is one, so a custom filter is a function
// literal. ev.Old is the cache's previous copy, nil for a resource new to
// the cache.
type Predicate func(ev cache.Event) bool

// GenerationChanged passes creations, deletions and updates that changed
// the resource's Generation (its data or metadata; the owner never changes)
// or its Uid, and drops the rest: updates that changed only statuses,
// whoever wrote them.
// A controller that reacts to statuses (its own or others') must not use it.
func GenerationChanged() Predicate {
	return func(ev cache.Event) bool {
		old, cur := ev.Old, ev.Resource
		if ev.Kind != cache.Upserted || old == nil {
			return true
		}
		return old.Generation != cur.Generation || old.GetId().GetUid() != cur.GetId().GetUid()
	}
}

// IgnoreOwnStatus drops updates whose only change is the status under key
// (by convention the controller's own status key, the one it passes to
// Runtime.WriteStatus): the event the controller's own status write causes,
// which would otherwise queue the resource once more for a reconcile that
// finds nothing to do. It passes everything else: creations, deletions,
// changes of data or metadata (a new Generation), a new Uid, and
// changes to any other status key (other statuses are compared with
// resource.EqualStatus, so a rewrite that changes only UpdatedAt counts as
// no change).
//
// Unsafe, so do not use it, when the controller:
//   - must react to someone else writing its status key (another writer, a
//     tool, an older instance of itself on another server during a lease
//     hand-over): the foreign status stays until the resource changes for
//     another reason;
//   - decides from its own status (e.g. keeps progress or a retry count in
//     it and relies on the write to trigger the next step): that step then
//     never comes. Return RequeueNow/RequeueAfter instead, or drop the
//     filter.
//
// A reconcile that runs before its own status write reached the cache sees
// the old status and writes again; the write is then a no-op or another
// status-only event, which this filter drops, so the controller still
// settles.
func IgnoreOwnStatus(key string) Predicate {
	return func(ev cache.Event) bool {
		old, cur := ev.Old, ev.Resource
		if ev.Kind != cache.Upserted || old == nil {
			return true
		}
		if old.Generation != cur.Generation || old.GetId().GetUid() != cur.GetId().GetUid() {
			return true
		}
		return !equalStatusesExcept(old.Status, cur.Status, key)
	}
}

// equalStatusesExcept reports whether a and b hold equal statuses under
// every key but skip.
func equalStatusesExcept(a, b map[string]*pbresource.Status, skip string) bool {
	for k, sa := range a {
		if k == skip {
			continue
		}
		sb, ok := b[k]
		if !ok || !resource.EqualStatus(sa, sb) {
			return false
		}
	}
	for k := range b {
		if k == skip {
			continue
		}
		if _, ok := a[k]; !ok {
			return false
		}
	}
	return true
}
