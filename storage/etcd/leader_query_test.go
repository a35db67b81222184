package etcd

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestLeaderQueryOfTheDocs: the "who leads" query of docs/operations.md,
//
//	etcdctl get --prefix /loom/leader/ --sort-by=CREATE --order=ASCEND --limit=1
//
// which etcdctl sends as the Get below, names the member that holds the
// lease, before and after a hand-over, even with an older key next to the
// election key (another store's prefix that begins with it).
func TestLeaderQueryOfTheDocs(t *testing.T) {
	key := newPrefix() + "/leader"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := testClient.Put(ctx, key+"-staging/r/x", "not a candidate"); err != nil {
		t.Fatal(err)
	}
	leads := func() string {
		t.Helper()
		resp, err := testClient.Get(ctx, key+"/", clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("the query: %v, %d keys", err, len(resp.Kvs))
		}
		return string(resp.Kvs[0].Value)
	}
	ctxA, cancelA := context.WithCancel(ctx)
	defer cancelA()
	a := startLease(t, ctxA, key, 10*time.Second, "a")
	waitHeld(t, a, true, 10*time.Second)
	b := startLease(t, ctx, key, 10*time.Second, "b")
	if got := leads(); got != "a" {
		t.Fatalf("the query names %q, want a (which holds the lease)", got)
	}
	cancelA()
	<-a.Done()
	waitHeld(t, b, true, 10*time.Second)
	if got := leads(); got != "b" {
		t.Fatalf("after the hand-over, the query names %q, want b", got)
	}
}
