package controller

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/dependency"
	"github.com/loomrt/loom/predicate"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
)

// Controller declares one controller. Build it with NewController and the
// With methods, then pass it to Manager.Register. The With methods change
// the Controller and return it, for chaining.
type Controller struct {
	name        string
	managedType *pbresource.Type
	indexes     []*cache.Index
	watches     []watch
	queries     []namedQuery
	filters     []eventFilter
	selections  []selection
	reconciler  reconcile.Reconciler
	initializer reconcile.Initializer
	placement   Placement
	baseBackoff time.Duration
	maxBackoff  time.Duration
	logger      hclog.Logger
	concurrency int
	// ryowBound is WithReadYourWrites's; ryowSet says it was called.
	ryowBound time.Duration
	ryowSet   bool
	// resync is WithResync's period; 0 for off.
	resync time.Duration
	// fifo queues every request at normal priority: the FIFO baseline of
	// benchmark W13p (export_test.go).
	fifo     bool
	problems []string
}

type watch struct {
	typ     *pbresource.Type
	mapper  reconcile.DependencyMapper
	indexes []*cache.Index
	method  string // the builder method that declared it, for messages
}

type eventFilter struct {
	typ        *pbresource.Type
	predicates []predicate.Predicate
}

// selection is one WithSelector: the resources of typ the controller sees.
type selection struct {
	typ *pbresource.Type
	sel selector.Selector
}

type namedQuery struct {
	name  string
	query cache.Query
}

// NewController starts declaring a controller called name that manages
// resources of managedType, which the cache indexes with indexes in
// addition to the built-in ones.
func NewController(name string, managedType *pbresource.Type, indexes ...*cache.Index) *Controller {
	return &Controller{name: name, managedType: managedType, indexes: indexes, concurrency: 1}
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.name }

// WithReconciler sets the reconciler. Required.
func (c *Controller) WithReconciler(r reconcile.Reconciler) *Controller {
	c.reconciler = r
	return c
}

// WithWatch makes the controller watch typ: every change to a resource of
// typ is passed to mapper, and the requests it returns are queued. indexes
// are added to the cache for typ. A type can be watched once per
// controller; the managed type needs no watch. A failing mapper is retried
// with backoff until it succeeds (a newer change of the same resource takes
// the failed one's place); requests it returns for another type than the
// managed one are logged, counted and dropped.
func (c *Controller) WithWatch(typ *pbresource.Type, mapper reconcile.DependencyMapper, indexes ...*cache.Index) *Controller {
	c.watches = append(c.watches, watch{typ: typ, mapper: mapper, indexes: indexes, method: "WithWatch"})
	return c
}

// WithOwned makes the controller watch typ, the type of resources its
// managed resources own, as controller-runtime's Owns: every change to a
// resource of typ whose owner is of the managed type (any GroupVersion)
// reconciles that owner, by name (dependency.MapOwnerFiltered). So when
// an owner is deleted and created again, the deletion of what its earlier
// lifetime owned reconciles the new owner, which can then create its own
// (see upsert.CreateOrUpdateOwned). indexes are added to the cache for
// typ. It is a watch like WithWatch's: a type can be watched once.
func (c *Controller) WithOwned(typ *pbresource.Type, indexes ...*cache.Index) *Controller {
	c.watches = append(c.watches, watch{typ: typ, mapper: dependency.MapOwnerFiltered(c.managedType), indexes: indexes, method: "WithOwned"})
	return c
}

// WithEventFilter makes the controller hear only of the changes to
// resources of typ (the managed type, or a type it watches) that pass every
// one of predicates; the rest are dropped before they are queued or mapped.
// Calling it again for the same type adds predicates. Filters see changes
// only: the resources queued when the controller starts are queued
// unfiltered. See package predicate for the ready-made filters and when
// they are unsafe. A panicking predicate is logged and the change passes.
func (c *Controller) WithEventFilter(typ *pbresource.Type, predicates ...predicate.Predicate) *Controller {
	c.filters = append(c.filters, eventFilter{typ: typ, predicates: predicates})
	return c
}

// WithSelector makes the controller see only the resources of typ (the
// managed type, or a type it watches) whose metadata match sel, as
// controller-runtime's cache.Options.ByObject: the Manager's cache holds
// only those (so its memory follows the selection), and its indexes,
// queries, mappers, event filters and reconciles see only those. A
// resource that stops matching is, for them, deleted; one that starts
// matching is created. The cache is shared by the Manager's controllers,
// so every controller of a Manager that manages or watches typ must select
// the same resources of it (Register fails otherwise); without
// WithSelector a controller selects all of them. Build sel with
// selector.Parse (or selector.MustParse for constants).
func (c *Controller) WithSelector(typ *pbresource.Type, sel selector.Selector) *Controller {
	c.selections = append(c.selections, selection{typ: typ, sel: sel})
	return c
}

// selectorOf returns the selector the controller declared for typ;
// Everything if none.
func (c *Controller) selectorOf(typ *pbresource.Type) selector.Selector {
	for _, s := range c.selections {
		if resource.EqualUnversionedType(s.typ, typ) {
			return s.sel
		}
	}
	return selector.Everything()
}

// WithQuery registers a named query on the cache, for the controller's
// reconciler and mappers to run with Cache.Query.
func (c *Controller) WithQuery(name string, q cache.Query) *Controller {
	c.queries = append(c.queries, namedQuery{name: name, query: q})
	return c
}

// WithPlacement sets where the controller runs (PlacementSingleton by
// default).
func (c *Controller) WithPlacement(p Placement) *Controller {
	c.placement = p
	return c
}

// WithInitializer sets a step that runs each time the controller starts,
// before its first reconcile, and is retried with backoff until it
// succeeds.
func (c *Controller) WithInitializer(i reconcile.Initializer) *Controller {
	c.initializer = i
	return c
}

// WithBackoff sets the bounds of the per-request exponential backoff after
// errors (default 5 ms and 1000 s). Failed dependency mappers are retried
// with the same bounds, per watched resource.
func (c *Controller) WithBackoff(base, max time.Duration) *Controller {
	if base <= 0 || max < base {
		c.problems = append(c.problems, fmt.Sprintf("WithBackoff(%s, %s): need 0 < base <= max", base, max))
	}
	c.baseBackoff, c.maxBackoff = base, max
	return c
}

// WithLogger sets the controller's logger (default: the Manager's, named
// after the controller).
func (c *Controller) WithLogger(l hclog.Logger) *Controller {
	c.logger = l
	return c
}

// WithConcurrency sets how many workers reconcile in parallel (default 1).
// One request key never runs on two workers at once.
func (c *Controller) WithConcurrency(n int) *Controller {
	if n < 1 {
		c.problems = append(c.problems, fmt.Sprintf("WithConcurrency(%d): need at least one worker", n))
	}
	c.concurrency = n
	return c
}

// WithReadYourWrites sets how long a resource waits, at most, after a
// reconcile that wrote, before it is reconciled again: the wait lasts until
// the cache holds every version that reconcile's writes (Write, WriteStatus)
// returned, for each type written that the cache holds, so that the next
// reconcile reads what the last one wrote. The default bound is
// DefaultReadYourWritesBound; 0 turns the wait off. Other resources are
// reconciled meanwhile. A wait that reaches its bound is counted in
// loom_controller_read_your_writes_timeouts_total.
func (c *Controller) WithReadYourWrites(bound time.Duration) *Controller {
	if bound < 0 {
		c.problems = append(c.problems, fmt.Sprintf("WithReadYourWrites(%s): need a bound of 0 (off) or more", bound))
	}
	c.ryowBound, c.ryowSet = bound, true
	return c
}

// readYourWritesBound returns the bound of read-your-own-writes; 0 for off.
func (c *Controller) readYourWritesBound() time.Duration {
	if !c.ryowSet {
		return DefaultReadYourWritesBound
	}
	return c.ryowBound
}

// validate reports every misconfiguration, naming the controller.
func (c *Controller) validate() error {
	problems := append([]string(nil), c.problems...)
	if c.name == "" {
		problems = append(problems, "the controller has no name")
	}
	if err := resource.ValidateType(c.managedType); err != nil {
		problems = append(problems, fmt.Sprintf("managed type: %v", err))
	}
	if c.reconciler == nil {
		problems = append(problems, "no reconciler (use WithReconciler)")
	}
	seen := map[resource.UnversionedType]bool{}
	if c.managedType != nil {
		seen[resource.UnversionedTypeFrom(c.managedType)] = true
	}
	for _, w := range c.watches {
		if err := resource.ValidateType(w.typ); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", w.method, err))
			continue
		}
		key := resource.UnversionedTypeFrom(w.typ)
		if seen[key] {
			if resource.EqualUnversionedType(w.typ, c.managedType) {
				problems = append(problems, fmt.Sprintf("%s(%s): the managed type is watched already", w.method, resource.TypeString(w.typ)))
			} else {
				problems = append(problems, fmt.Sprintf("%s(%s): the type is watched twice", w.method, resource.TypeString(w.typ)))
			}
		}
		seen[key] = true
		if w.mapper == nil {
			problems = append(problems, fmt.Sprintf("%s(%s): nil dependency mapper", w.method, resource.TypeString(w.typ)))
		}
	}
	for _, f := range c.filters {
		if f.typ == nil || !seen[resource.UnversionedTypeFrom(f.typ)] {
			problems = append(problems, fmt.Sprintf("WithEventFilter(%s): not the managed type nor a watched one", resource.TypeString(f.typ)))
		}
		for _, p := range f.predicates {
			if p == nil {
				problems = append(problems, fmt.Sprintf("WithEventFilter(%s): nil predicate", resource.TypeString(f.typ)))
				break
			}
		}
	}
	selected := map[resource.UnversionedType]bool{}
	for _, s := range c.selections {
		key := resource.UnversionedTypeFrom(s.typ)
		switch {
		case s.typ == nil || !seen[key]:
			problems = append(problems, fmt.Sprintf("WithSelector(%s): not the managed type nor a watched one", resource.TypeString(s.typ)))
		case selected[key]:
			problems = append(problems, fmt.Sprintf("WithSelector(%s): the type has a selector already", resource.TypeString(s.typ)))
		}
		selected[key] = true
	}
	queryNames := map[string]bool{}
	for _, q := range c.queries {
		if q.name == "" || q.query == nil {
			problems = append(problems, "WithQuery: a query needs a name and a function")
			continue
		}
		if queryNames[q.name] {
			problems = append(problems, fmt.Sprintf("WithQuery(%q): defined twice", q.name))
		}
		queryNames[q.name] = true
		if iq, ok := q.query.(interface {
			IndexUse() (*pbresource.Type, string)
		}); ok {
			typ, index := iq.IndexUse()
			if !c.hasIndex(typ, index) {
				problems = append(problems, fmt.Sprintf("WithQuery(%q): type %s has no index %q in this controller", q.name, resource.TypeString(typ), index))
			}
		}
	}
	if len(problems) == 0 {
		return nil
	}
	msg := fmt.Sprintf("controller %q is misconfigured:", c.name)
	for _, p := range problems {
		msg += "\n  - " + p
	}
	return fmt.Errorf("%s", msg)
}

// hasIndex reports whether the controller declares index for typ.
func (c *Controller) hasIndex(typ *pbresource.Type, index string) bool {
	if index == cache.IDIndex || index == cache.OwnerIndex {
		return resource.EqualUnversionedType(typ, c.managedType) || c.watchOf(typ) != nil
	}
	var list []*cache.Index
	if resource.EqualUnversionedType(typ, c.managedType) {
		list = c.indexes
	} else if w := c.watchOf(typ); w != nil {
		list = w.indexes
	}
	for _, ix := range list {
		if ix.Name() == index {
			return true
		}
	}
	return false
}

func (c *Controller) watchOf(typ *pbresource.Type) *watch {
	for i := range c.watches {
		if resource.EqualUnversionedType(c.watches[i].typ, typ) {
			return &c.watches[i]
		}
	}
	return nil
}

// types returns every type the controller needs in the cache.
func (c *Controller) types() []*pbresource.Type {
	out := []*pbresource.Type{c.managedType}
	for _, w := range c.watches {
		out = append(out, w.typ)
	}
	return out
}
