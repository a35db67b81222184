// Package clustertest holds the multi-process cluster tests of Loom on etcd:
// a 3-member etcd cluster and 3 `loom server -storage etcd` processes on
// loopback, the example Bar controller, and faults while a client keeps
// writing: the leading server and etcd's leader member killed, the member
// restarted, the next leading server cut off from etcd (its writes held in
// flight by a proxy) and frozen (SIGSTOP), etcd compacted meanwhile, and
// the frozen server's late writes refused by the fence (TestCluster). A
// second test (TestClusterHistory) runs the porcupine-checked workload of
// internal/testkit/robustness across the 3 servers of a cluster of its own while
// the leading server is killed, etcd's leader is killed and restarted, a
// server's link to etcd is held, and etcd is compacted.
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
