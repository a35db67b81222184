package host_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
)

// TestResourceMetrics: /metrics serves the counts of the stored resources
// by type, those marked for deletion apart, as writes change them.
func TestResourceMetrics(t *testing.T) {
	h := startHost(t, "-dev")
	base := "http://" + h.httpAddr
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ns := range []string{"default", "other"} {
		if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, ns, "m1", "M")}); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	kept := bar(t, "default", "kept", "K")
	kept.Metadata = map[string]string{"finalizers": "test/keep"}
	w, err := client.Write(ctx, &pbresource.WriteRequest{Resource: kept})
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if _, err := client.Delete(ctx, &pbresource.DeleteRequest{Id: w.Resource.Id}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	waitHTTP(t, base+"/metrics", func(code int, body string) bool {
		return code == http.StatusOK &&
			strings.Contains(body, "\nloom_resources{type=\"foo.Bar\"} 3\n") &&
			strings.Contains(body, "\nloom_resources_marked_for_deletion{type=\"foo.Bar\"} 1\n")
	})
}
