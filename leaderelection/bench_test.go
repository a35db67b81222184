package leaderelection

import (
	"context"
	"testing"
	"time"

	pbleasev1 "github.com/loomrt/loom/proto/pblease/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
)

// BenchmarkRenew measures one renewal, the holder's call every retry
// period: a compare-and-swap Write of the lease record. BenchmarkObserve
// measures the others' call every retry period: a consistent Read and the
// check whether the lease is free. Both over an in-memory gRPC connection.
func BenchmarkRenew(b *testing.B) {
	e := benchElector(b)
	ctx := context.Background()
	if err := e.tryAcquire(ctx); err != nil || !e.Held() {
		b.Fatalf("acquiring: held %v, %v", e.Held(), err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := e.renew(ctx); err != nil || !e.Held() {
			b.Fatalf("renewing: held %v, %v", e.Held(), err)
		}
	}
}

func BenchmarkObserve(b *testing.B) {
	holder := benchElector(b)
	ctx := context.Background()
	if err := holder.tryAcquire(ctx); err != nil || !holder.Held() {
		b.Fatalf("acquiring: held %v, %v", holder.Held(), err)
	}
	other, err := New(holder.client, holder.id, "other", WithLeaseDuration(time.Hour), WithRenewDeadline(time.Minute), WithRetryPeriod(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := other.tryAcquire(ctx); err != nil || other.Held() {
			b.Fatalf("observing: held %v, %v", other.Held(), err)
		}
	}
}

// benchElector returns an Elector on a released lease of a fresh service.
func benchElector(b *testing.B) *Elector {
	svc := resourcetest.StartService(b, resourcetest.WithTypes(RegisterTypes), resourcetest.OverGRPC())
	id := &pbresource.ID{Type: LeaseType, Name: "bench"}
	e, err := New(svc.Client, id, "holder", WithLeaseDuration(time.Hour), WithRenewDeadline(time.Minute), WithRetryPeriod(time.Second))
	if err != nil {
		b.Fatal(err)
	}
	// Released: the first campaign takes it at once.
	if _, err := e.write(context.Background(), &pbleasev1.Lease{}, ""); err != nil {
		b.Fatal(err)
	}
	return e
}
