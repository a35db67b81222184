package host_test

import (
	"context"

	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/host"
	"github.com/loomrt/loom/proto/pbresource"
)

// TestAuditFlood: a client sending request after request with a wrong
// token, and one with a token that lacks the access, get a few audit lines
// between them, not one per request; the lines count every refusal
// exactly, and so does loom_requests_denied_total.
func TestAuditFlood(t *testing.T) {
	h := startHost(t, "-dev", "-acl-file", writeFile(t, t.TempDir(), "acl.yaml", []byte(testACL)))
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id := bar(t, "default", "b", "x").Id

	const perToken = 1000
	var wg sync.WaitGroup
	for _, secret := range []string{"wrong-secret", "team-a-secret"} {
		for range 4 {
			wg.Go(func() {
				ctx := metadata.AppendToOutgoingContext(ctx, "x-consul-token", secret)
				for range perToken / 4 {
					_, err := client.Read(ctx, &pbresource.ReadRequest{Id: id})
					if c := status.Code(err); c != codes.Unauthenticated && c != codes.PermissionDenied {
						t.Errorf("Read with %s: %v, want it refused", secret, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()

	const read = `/hashicorp.consul.resource.ResourceService/Read`
	for _, code := range []string{"Unauthenticated", "PermissionDenied"} {
		sample := `loom_requests_denied_total{code="` + code + `",method="` + read + `"}`
		if got := metric(t, h.httpAddr, sample); got != perToken {
			t.Errorf("%s = %d, want %d", sample, got, perToken)
		}
	}

	if err := h.stop(); err != nil {
		t.Fatalf("stopping: %v", err)
	}
	lines, refusals := host.AuditLines(t, h.log.String())
	if refusals != 2*perToken {
		t.Errorf("the audit lines count %d refusals, want %d; log:\n%s", refusals, 2*perToken, h.log)
	}
	// Per token: a line at once, then one per 10s window (and the last
	// at shutdown); the flood takes far less than 10s here, but a slow
	// machine may see a window pass.
	if lines > 2*4 {
		t.Errorf("%d audit lines for 2 tokens, want at most 8; log:\n%s", lines, h.log)
	}
}
