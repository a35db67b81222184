package host_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// TestEtcdRequestMetrics: with -storage etcd, /metrics has the etcd
// request metrics, and a write moves them.
func TestEtcdRequestMetrics(t *testing.T) {
	h := startHost(t, "-storage", "etcd", "-etcd-endpoints", etcdtest.Start(t), "-etcd-prefix", "/metrics",
		"-controllers=false", "-etcd-call-timeout", "2s")
	addr := h.httpAddr
	const txns = `loom_storage_etcd_request_duration_seconds_count{op="txn"}`
	before := metric(t, addr, txns)
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "default", "m1", "M")}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if after := metric(t, addr, txns); after <= before {
		t.Errorf("%s: %d before a write, %d after", txns, before, after)
	}
	metric(t, addr, "loom_storage_etcd_unavailable_total")
	rsp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	body, _ := io.ReadAll(rsp.Body)
	for _, family := range []string{`loom_storage_etcd_retries_total{reason="stale_member"}`} {
		if !strings.Contains(string(body), family) {
			t.Errorf("/metrics lacks %s", family)
		}
	}
}
