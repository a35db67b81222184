// Package controller is Loom's controller framework: a builder to declare a
// controller (the type it manages, what it watches, how it reconciles, where
// it runs) and a Manager that runs controllers against any ResourceService.
//
// A Manager keeps one shared cache, fed by one WatchList stream per watched
// type; no mapper or reconciler of a controller runs before the cache holds
// the full snapshot of every type the controller watches. Changes to the
// managed type queue the resource itself; changes to a watched type go
// through the watch's dependency mapper. Each controller has its own work
// queue (de-duplicating, one worker per key at a time, exponential backoff
// on errors) and WithConcurrency workers.
//
// Who may change what follows the one rule in the resource package doc
// ("Who may change a message"): watch events and what the cache holds are
// immutable; a reconciler's cache reads are its own copies, while
// dependency mappers, event filters and read-only cache views see the
// cache's own resources and must not change them.
package controller
