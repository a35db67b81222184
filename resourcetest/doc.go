// Package resourcetest is the testing kit for controller authors: an
// in-process ResourceService (the real server over the in-memory backend),
// a resource builder, a client wrapper with Require* and WaitFor* checks,
// and a harness that runs controllers in a test. Everything runs inside the
// test binary; nothing needs a separate process.
package resourcetest
