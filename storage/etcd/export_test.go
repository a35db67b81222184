package etcd

import clientv3 "go.etcd.io/etcd/client/v3"

// SharedTestClient returns the client of the etcd the package's tests
// start, for its external tests (package etcd_test).
func SharedTestClient() *clientv3.Client { return testClient }
