// Package leaderelection elects a leader among the replicas of a remote
// controller process — one that runs its Manager against a server it
// dialled (package dial) — with a lease resource on the ResourceService
// itself, like Kubernetes' Lease objects. An Elector is a controller.Lease:
// the Manager runs singleton controllers only while it is held.
//
//	lease, err := leaderelection.New(client, &pbresource.ID{Name: "my-controllers"}, identity)
//	mgr, err := controller.NewManager(client, logger, controller.WithLease(lease))
//
// Package remote runs such a process, with this wiring done and flags for
// it; use this package directly for wiring of your own.
//
// The lease is a loom.v1.Lease resource (LeaseType; data pbleasev1.Lease:
// holder identity, lease duration, acquire and renew times, transitions)
// in the ID's partition and namespace. Every change to it is a Write with
// the Version last read (a compare-and-swap), so of several replicas
// campaigning at once exactly one takes it. The holder renews it every
// retry period; the others take it over when it has not changed for a
// lease duration, or at once when its holder released it on a graceful stop
// (Run's context ended): they watch the lease, and a release wakes them.
// The first election on a new lease is as quick: the replica that finds no
// lease creates it, and a lease that nobody has held since it was created
// may be taken at once; the watch tells such a lease from one that a late
// creation wrote over a holder's record (see history.go).
//
// # Servers
//
// The server must know the type: every Loom host registers it (a server of
// your own: RegisterTypes). Consul does not, and a Consul server cannot be
// taught new types, so against Consul this package does not work (Run
// returns an error): elect there by other means, e.g. an etcd lease or
// Consul's own sessions, and call Manager.SetLeader. With ACLs on, the
// controller's token needs write access to loom.v1.Lease in the lease's
// partition and namespace.
//
// # What it guarantees
//
// Two replicas never both see Held() == true at the same instant, as long
// as their clocks run at about the same rate (the replicas compare no
// times written in the record with their own clocks, so clocks set
// differently do not matter; one running faster than another by more than
// lease duration - renew deadline over one lease duration does), and each
// replica has its own identity. The holder gives the lease up one renew deadline
// after the last renewal it sent that succeeded; the others take it no
// sooner than one lease duration after they saw that renewal. The difference
// (5 s by default) is the time a leader's singleton controllers have to
// stop. Do not delete a lease in use: a replica that starts after the
// deletion cannot know the old holder, and may take the lease it creates
// anew before that holder notices at its next renewal (as with a deleted
// Lease object in Kubernetes).
//
// # What it does not: fencing
//
// A remote controller has no fencing token: the etcd fence of
// storage/etcd is only for controllers in the server's own process. So a
// leader that checked Held, then was paused (garbage collection, a stopped
// VM, a long network stall of a write already sent) and resumed after
// another replica took the lease, can still land a write: a write sent up
// to the clock-rate skew (or the pause) late is not refused. Write with a
// Version (compare-and-swap) in reconcilers whose writes must not race a
// new leader's; the lease's own writes are always compare-and-swap, so the
// lease record itself is never corrupted by a deposed leader.
package leaderelection
