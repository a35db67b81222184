package cache

import (
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// EventKind says what happened to a resource.
type EventKind int

const (
	// Upserted: the resource was created or changed.
	Upserted EventKind = iota + 1
	// Deleted: the resource was removed.
	Deleted
)

// Event is a change applied to the cache, which the Manager hands to its
// controllers' filters, work queues and mappers.
// Resource is the new state (Upserted) or the last known state (Deleted).
// Old is the resource the cache held before the change (nil when the cache
// held none, i.e. the resource is new to it); for a Deleted event it is what
// the cache removed. Both are the cache's own immutable resources: read
// them, never change them. Old costs nothing extra: the cache drops it
// anyway.
type Event struct {
	Kind     EventKind
	Resource *pbresource.Resource
	Old      *pbresource.Resource
	// Snapshot says the change was found by comparing a watch's snapshot
	// with the cache (priming, or filling the cache again after a watch
	// could not resume), not received as it happened: the Manager queues
	// its reconciles at low priority.
	Snapshot bool
}

// Replace makes resources the entire content of their type in one step, as
// if every change between the old and new content had been applied at once,
// and returns those changes: an Upserted event for every resource that is
// new or has a new Version, and a Deleted event for every resource that is
// gone. Readers see the old content or the new, never a mix. The cache keeps
// the given resources as they are (see Upsert).
func (c *Cache) Replace(typ *pbresource.Type, resources []*pbresource.Resource) ([]Event, error) {
	return c.replace(typ, resources, false)
}

// ReplaceGroupVersion is Replace for a server whose watches keep only one
// GroupVersion (Consul): resources become the entire content of typ's
// GroupVersion, and cached resources stored under another GroupVersion of
// the type are left alone (neither kept as seen nor reported gone).
func (c *Cache) ReplaceGroupVersion(typ *pbresource.Type, resources []*pbresource.Resource) ([]Event, error) {
	return c.replace(typ, resources, true)
}

func (c *Cache) replace(typ *pbresource.Type, resources []*pbresource.Resource, scoped bool) ([]Event, error) {
	tc, err := c.typeCache(typ)
	if err != nil {
		return nil, err
	}
	tc.mu.Lock()
	defer tc.mu.Unlock()

	first := tc.byID.len() == 0
	if first && len(resources) > 0 {
		// The first snapshot: make the maps their final size at once
		// instead of growing them step by step.
		counts := make(map[tenancyKey]int)
		for _, res := range resources {
			ten := res.GetId().GetTenancy()
			counts[tenancyKey{ten.GetPartition(), ten.GetNamespace()}]++
		}
		tc.byID.presize(counts)
	}
	// Into an empty type nothing can be gone: no need to note what was seen.
	var seen map[resource.NameKey]struct{}
	var events []Event
	if first {
		events = make([]Event, 0, len(resources))
	} else {
		seen = make(map[resource.NameKey]struct{}, len(resources))
	}
	for _, res := range resources {
		k := resource.NameKeyOf(res.Id)
		if !first {
			seen[k] = struct{}{}
		}
		if prev, ok := tc.byID.get(k); ok && prev.res.Version == res.Version && prev.res.Id.Uid == res.Id.Uid {
			continue // unchanged: keep the stored resource
		}
		old, err := tc.upsert(res)
		if err != nil {
			return events, err
		}
		events = append(events, Event{Kind: Upserted, Resource: res, Old: old})
	}
	if first {
		return events, nil
	}
	var gone []resource.NameKey
	tc.byID.each(func(k resource.NameKey, e *entry) bool {
		if scoped && e.res.GetId().GetType().GetGroupVersion() != typ.GetGroupVersion() {
			return true
		}
		if _, ok := seen[k]; !ok {
			gone = append(gone, k)
		}
		return true
	})
	for _, k := range gone {
		e, _ := tc.byID.remove(k)
		removeEntry(e)
		events = append(events, Event{Kind: Deleted, Resource: e.res, Old: e.res})
	}
	return events, nil
}
