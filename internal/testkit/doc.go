// Package testkit holds, in its subpackages, the harnesses of Loom's own
// tests and benchmarks: the robustness history, the ACL matrix, the
// selector suite, CPU and heap measurement, test certificates and loggers.
// They sit above every layer they exercise (server, storage) and are never
// imported by the packages Loom ships; the packages beside testkit under
// internal/ are the core's own (codecs, retry, lifetimes, limits).
package testkit
