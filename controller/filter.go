package controller

import (
	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/predicate"
	"github.com/loomrt/loom/resource"
)

// eventFilters returns the controller's predicates by unversioned type
// key, or nil when it has none.
func (c *Controller) eventFilters() map[resource.UnversionedType][]predicate.Predicate {
	if len(c.filters) == 0 {
		return nil
	}
	out := make(map[resource.UnversionedType][]predicate.Predicate)
	for _, f := range c.filters {
		key := resource.UnversionedTypeFrom(f.typ)
		out[key] = append(out[key], f.predicates...)
	}
	return out
}

// passes reports whether ev passes every predicate. It runs on a watch
// goroutine, which a panic would take down with the process: a panicking
// predicate is logged and the change passes (queuing too much is safe,
// dropping is not).
func passes(predicates []predicate.Predicate, ev cache.Event, logger hclog.Logger) (ok bool) {
	defer func() {
		if r := recover(); r != nil {
			logger.Error("event filter panicked; the change passes", "resource", resource.IDString(ev.Resource.GetId()), "panic", r)
			ok = true
		}
	}()
	for _, p := range predicates {
		if !p(ev) {
			return false
		}
	}
	return true
}
