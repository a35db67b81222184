package host_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
)

// TestMaxListBytes: -max-list-bytes reaches the service: an unpaged List
// over it is ResourceExhausted, naming page_size; pages get everything.
func TestMaxListBytes(t *testing.T) {
	h := startHost(t, "-dev", "-max-list-bytes", "8192")
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 10 {
		if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "default", fmt.Sprintf("b%d", i), strings.Repeat("x", 1024))}); err != nil {
			t.Fatal(err)
		}
	}
	req := &pbresource.ListRequest{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}}
	_, err := client.List(ctx, req)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "page_size") {
		t.Fatalf("an unpaged List over -max-list-bytes: got %v, want ResourceExhausted naming page_size", err)
	}
	n := 0
	for req.PageSize = 100; ; {
		rsp, err := client.List(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		n += len(rsp.Resources)
		if rsp.NextPageToken == "" {
			break
		}
		req.PageToken = rsp.NextPageToken
	}
	if n != 10 {
		t.Errorf("paging got %d Bars, want 10", n)
	}
}
