package controller

import (
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/selector"
)

// Description is what a Controller was declared with. Test kits and tools
// use it to drive a controller's parts without a Manager; the slices are
// copies, but the types, indexes, mappers and reconciler are the
// controller's own and must not be changed.
type Description struct {
	Name        string
	ManagedType *pbresource.Type
	// Indexes are the extra cache indexes of the managed type.
	Indexes []*cache.Index
	// Selector selects the resources of the managed type the controller
	// sees (WithSelector); the zero Selector selects all.
	Selector selector.Selector
	Watches  []WatchDescription
	Queries  []QueryDescription
	// Reconciler and Initializer are nil when they were not set.
	Reconciler  reconcile.Reconciler
	Initializer reconcile.Initializer
}

// WatchDescription is one WithWatch of a controller.
type WatchDescription struct {
	Type    *pbresource.Type
	Mapper  reconcile.DependencyMapper
	Indexes []*cache.Index
	// Selector selects the resources of Type the controller sees.
	Selector selector.Selector
}

// QueryDescription is one WithQuery of a controller.
type QueryDescription struct {
	Name  string
	Query cache.Query
}

// Describe returns what c was declared with.
func (c *Controller) Describe() Description {
	d := Description{
		Name:        c.name,
		ManagedType: c.managedType,
		Indexes:     append([]*cache.Index(nil), c.indexes...),
		Selector:    c.selectorOf(c.managedType),
		Reconciler:  c.reconciler,
		Initializer: c.initializer,
	}
	for _, w := range c.watches {
		d.Watches = append(d.Watches, WatchDescription{Type: w.typ, Mapper: w.mapper, Indexes: append([]*cache.Index(nil), w.indexes...), Selector: c.selectorOf(w.typ)})
	}
	for _, q := range c.queries {
		d.Queries = append(d.Queries, QueryDescription{Name: q.name, Query: q.query})
	}
	return d
}

// Controllers returns the controllers registered on m, in the order they
// were registered.
func (m *Manager) Controllers() []*Controller {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]*Controller(nil), m.controllers...)
}
