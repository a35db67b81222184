package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// TestStatsOnEtcd: loom stats against servers sharing one etcd counts the
// writes made through any of them.
func TestStatsOnEtcd(t *testing.T) {
	endpoint := etcdtest.Start(t)
	args := func(node string) []string {
		return []string{"-storage", "etcd", "-etcd-endpoints", endpoint, "-etcd-prefix", "/loomstats",
			"-grpc-addr", "127.0.0.1:0", "-node-name", node, "-examples"}
	}
	addrA, _, _ := startServer(t, args("a")...)
	addrB, _, _ := startServer(t, args("b")...)
	if _, _, err := runBoth("stats", "-addr", addrB); err != nil { // b counts from now on
		t.Fatal(err)
	}
	client := pbresource.NewResourceServiceClient(dialServer(t, addrA))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"one", "two"} {
		if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: barResource(t, name, "B")}); err != nil {
			t.Fatalf("Write through a: %v", err)
		}
	}
	const want = "\nfoo.Bar  2          0\n"
	var out string
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out, want); {
		var err error
		if out, _, err = runBoth("stats", "-addr", addrB, "foo.v1.Bar"); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("loom stats on b printed %q, want a line %q", out, want)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}
