// Package resourcetest is the testing kit for controller authors. Nothing
// in it needs a separate process: the ResourceService, the controllers and
// the test all run in the test binary.
//
//   - StartService and RunResourceService run the real ResourceService
//     over the in-memory backend, in process (or over an in-memory gRPC
//     connection with OverGRPC), optionally with the built-in controllers,
//     or behaving like Consul's where Loom's differs (ConsulLike), so that
//     code meant for both is tested against both.
//   - Resource declares a resource with a builder that can Build the
//     message or Write it, statuses included.
//   - Client wraps a ResourceService client with Require* checks of the
//     current state and WaitFor* checks that poll until a state is reached.
//     A failure names the resource, says what was expected and shows the
//     resource as it was last read. WaitForList and WaitForOwned wait on
//     lists; RequireSettled watches for writes over a window to check that
//     a controller has settled.
//   - RunControllers (RunControllersWith, to pass Manager options) runs
//     controllers on a leader Manager for the length of a test;
//     ControllerHarness runs one Reconcile or one dependency mapper at a
//     time against a cache the test prepares, for table tests.
//
// Helpers take a T, the part of *testing.T they use, so they can be driven
// by a fake in tests of test helpers. docs/testing.md is the guide.
package resourcetest
