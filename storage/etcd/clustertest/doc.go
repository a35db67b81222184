// Package clustertest holds the multi-process cluster test of Loom on etcd:
// a 3-member etcd cluster and 3 `loom server -storage etcd` processes on
// loopback, the example Bar controller, and faults (the leading server and
// an etcd member killed) while a client keeps writing.
//
// The test is behind the build tag "cluster", so `go test ./...` skips it;
// run it with `make test-cluster`, i.e.
//
//	cd storage/etcd && go test -tags cluster -count=1 -v ./clustertest
//
// It builds the loom binary and the etcd member launcher
// (storage/etcd/internal/etcdmember) with `go build` from the repository's
// go.work, so it needs nothing installed but Go.
package clustertest
