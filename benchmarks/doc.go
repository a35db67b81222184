// Package benchmarks runs Loom's benchmark workloads side by side with the
// peers they are compared with (client-go's workqueue and Indexer), in one
// process, so the ratio is measured rather than quoted. It is its own Go
// module so the core module never depends on the peers; it holds only
// benchmarks (go test -run '^$' -bench . ./...), see docs/performance.md.
//
// Every workload runs as sub-benchmarks named impl=loom, impl=client-go
// (with Prometheus metrics, as a controller-runtime controller has them) and,
// where metrics matter, impl=client-go-nometrics. Each reports the
// workload's metric names; the peers add "ratio": the peer's figure divided
// by Loom's median figure from the same run, so above 1 means Loom is
// cheaper or faster by that factor.
package benchmarks
