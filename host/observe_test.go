package host_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	rsp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(rsp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return rsp.StatusCode, string(body)
}

// waitHTTP polls url until ok accepts its answer, within 10 s.
func waitHTTP(t *testing.T, url string, ok func(code int, body string) bool) (int, string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := httpGet(t, url)
		if ok(code, body) {
			return code, body
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: no acceptable answer within 10s; last %d %q", url, code, body)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}

// TestHostHTTP: the probes, the metrics (Loom's, gRPC's and Go's), and
// pprof only with -pprof.
func TestHostHTTP(t *testing.T) {
	h := startHost(t, "-dev", "-pprof")
	base := "http://" + h.httpAddr

	if code, _ := httpGet(t, base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200", code)
	}
	// On in-memory storage the server always leads.
	if _, body := waitHTTP(t, base+"/readyz", func(code int, _ string) bool { return code == http.StatusOK }); body != "ok\nleader: leading\n" {
		t.Errorf("/readyz = %q, want ok and leader: leading", body)
	}

	// A write makes the example controller reconcile, so its families
	// have samples.
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "default", "m1", "M")}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	_, metrics := waitHTTP(t, base+"/metrics", func(_ int, body string) bool {
		return strings.Contains(body, "\nloom_controller_reconcile_total{")
	})
	for _, family := range []string{"go_goroutines", "process_", "workqueue_", `grpc_server_handled_total{grpc_code="OK",grpc_method="Write"`,
		"\nloom_storage_watches_open ", "\nloom_storage_watch_events_buffered ", "\nloom_storage_watches_dropped_total 0\n",
		"\nloom_leader{lease=\"inmem\"} 1\n", "\nloom_build_info{go=\"go", `grpc_server_handling_seconds_bucket{grpc_method="Write",grpc_service="hashicorp.consul.resource.ResourceService",grpc_type="unary",le="0.0005"}`} {
		if !strings.Contains(metrics, family) {
			t.Errorf("/metrics lacks %s", family)
		}
	}
	// The controllers' caches watch the storage.
	if strings.Contains(metrics, "\nloom_storage_watches_open 0\n") {
		t.Error("/metrics has no storage watch open, with the controllers primed")
	}
	if code, _ := httpGet(t, base+"/debug/pprof/"); code != http.StatusOK {
		t.Errorf("/debug/pprof/ with -pprof = %d, want 200", code)
	}

	plain := startHost(t, "-dev")
	if code, _ := httpGet(t, "http://"+plain.httpAddr+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("/debug/pprof/ without -pprof = %d, want 404", code)
	}
}

func dialPlain(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
