// Package robustness checks the ResourceService's promises on recorded
// histories. Concurrent clients run seeded random operations (CAS and
// blanket Write, WriteStatus, Delete with and without a version, strong
// and eventual Read, List) against a live service, and watchers keep
// WatchList streams open, each broken off after a random number of
// events and resumed from the last version it delivered, one of them read
// slowly. The recorded history is then checked:
//
//   - strong reads and every write are checked for linearizability with
//     porcupine, against a model of one register per resource name that
//     knows Uids, Versions, Generations, statuses and the no-op rule (see
//     model.go);
//   - eventual reads and List results are checked for monotonicity (no
//     result older than one an earlier completed read returned, whichever
//     client made it) and against the acknowledged writes (no value that
//     no write produced);
//   - every watch is checked by ValidateWatch (see watch.go); a resumed
//     stream's events go on in the record of the stream it resumes, so
//     the watch is checked as one unbroken stream.
//
// A seed fixes each client's choice of operations (not the interleaving,
// which the scheduler decides); every failure names the seed, and the
// -robustness.seed flag or the LOOM_ROBUSTNESS_SEED variable replays it.
//
// Resources have no owners, so Tombstones are outside the model; with
// Config.Finalizers they have finalizers, so Deletes mark them and Writes
// finish their deletion.
//
// An error the model does not expect fails the check, unless
// Config.Indeterminate says it leaves the outcome open (as a lost response
// does): such an operation is checked as having taken effect, at any
// moment after its call, or not at all. Config.Between lets a fault
// injector act between operations, and Config.Connect spreads the clients
// and watchers over several servers. They are for runs with faults such
// as the multi-process cluster test's, which also sets Config.Type to
// foo.v1.Zip: its servers run the example Bar controller, whose writes
// the model does not know.
package robustness
