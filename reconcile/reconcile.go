// Package reconcile holds what controllers, mappers and the controller
// framework share: the Runtime a reconciler works with, the Request it is
// asked to reconcile, the Reconciler, Initializer and DependencyMapper
// types, and the errors by which a reconciler chooses what happens next
// (RequeueAfter, RequeueNow, TerminalError), and AsDecoded, which reads a
// reconciler's resource from the cache and decodes it for it. It sits below
// controller and dependency so neither imports the other. (It was called runtime, which clashed with the standard library's
// package of that name in every file that needed both.)
package reconcile

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"google.golang.org/grpc"
)

// Runtime is what a reconciler, initializer or mapper works with.
type Runtime struct {
	// Client talks to the ResourceService. Write through it. In a
	// reconcile, the controller runtime notes the versions its writes
	// return, and reconciles the same resource again only once the cache
	// holds them (controller.Controller.WithReadYourWrites).
	Client pbresource.ResourceServiceClient
	// Logger is the controller's logger, with the controller's name as the
	// "controller" field. In a reconcile it also names the request, as the
	// "request" field ("partition/namespace/name"), like controller-runtime's
	// log.FromContext; that logger is built on the first message, so a
	// reconcile that does not log does not pay for it.
	Logger hclog.Logger
	// Cache is the Manager's shared cache, holding every type the
	// controller watches, primed before any reconcile. Read from it.
	Cache cache.ReadOnlyCache
}

// Request asks a controller to reconcile one of its managed resources.
type Request struct {
	// ID of the resource. Its Uid, when set, tells which lifetime of it the
	// request came from, but the request is for whatever resource has the
	// name when it runs (the queue keys requests by name; AsDecoded reads
	// the current one). It may be the cache's own (mappers return stored
	// IDs without copying them), so it is read-only: never change it;
	// resource.CloneID gives a copy to change.
	ID *pbresource.ID
}

// Key returns the work-queue key of the request: its tenancy and name. A
// controller manages one type, so the type is not part of the key, and a
// request with a Uid and one without are the same work.
func (r Request) Key() RequestKey { return resource.NameKeyOf(r.ID) }

// RequestKey identifies a managed resource in a controller's work queue: the
// resource's resource.NameKey.
type RequestKey = resource.NameKey

// Reconciler brings the world in line with one resource. Return nil when
// done, an error to retry with backoff, or reconcile.RequeueAfter /
// reconcile.RequeueNow to choose when to run again.
type Reconciler interface {
	Reconcile(ctx context.Context, rt Runtime, req Request) error
}

// ReconcileFunc adapts a function to Reconciler.
type ReconcileFunc func(ctx context.Context, rt Runtime, req Request) error

// Reconcile implements Reconciler.
func (f ReconcileFunc) Reconcile(ctx context.Context, rt Runtime, req Request) error {
	return f(ctx, rt, req)
}

// Initializer runs once each time a controller starts, before its first
// reconcile; an error is retried with backoff.
type Initializer interface {
	Initialize(ctx context.Context, rt Runtime) error
}

// InitializeFunc adapts a function to Initializer.
type InitializeFunc func(ctx context.Context, rt Runtime) error

// Initialize implements Initializer.
func (f InitializeFunc) Initialize(ctx context.Context, rt Runtime) error { return f(ctx, rt) }

// DependencyMapper turns a change to a watched resource into the managed
// resources to reconcile. res is the resource's new state (or, for a
// deletion, its last state), as the cache holds it: read-only, like
// everything the cache holds (resource.Clone gives a copy to change).
type DependencyMapper func(ctx context.Context, rt Runtime, res *pbresource.Resource) ([]Request, error)

// RequestsFromIDs wraps IDs in Requests. The Requests share the IDs (with
// the cache, when they come from ListIDsReadOnly): see Request.ID.
func RequestsFromIDs(ids []*pbresource.ID) []Request {
	out := make([]Request, len(ids))
	for i, id := range ids {
		out[i] = Request{ID: id}
	}
	return out
}

// responseUnread holds the option WriteStatus passes: made once, since a
// variadic argument handed to an interface method would be allocated on
// every call. Clients only read their options.
var responseUnread = []grpc.CallOption{resource.ResponseUnread()}

// WriteStatus writes status under key on res only if it differs from what
// res already carries (resource.EqualStatus, UpdatedAt ignored), and reports
// whether it wrote. An empty ObservedGeneration is set to res.Generation.
// res should be the latest copy the reconciler has (e.g. from the cache);
// the write is aimed at its Uid, so a deleted-and-recreated resource is not
// touched.
func (rt Runtime) WriteStatus(ctx context.Context, res *pbresource.Resource, key string, status *pbresource.Status) (bool, error) {
	if status.ObservedGeneration == "" {
		status.ObservedGeneration = res.GetGeneration()
	}
	if current, ok := res.GetStatus()[key]; ok && resource.EqualStatus(current, status) {
		return false, nil
	}
	_, err := rt.Client.WriteStatus(ctx, &pbresource.WriteStatusRequest{
		Id:     res.GetId(),
		Key:    key,
		Status: status,
	}, responseUnread...)
	if err != nil {
		return false, err
	}
	return true, nil
}
