package controller_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/dependency"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/anypb"
)

// mapperHarness runs a Bar controller that watches Zips through mapper and
// reports every request it reconciles on reconciled. It returns once the
// controller runs (it has reconciled the Bar "ready").
func mapperHarness(t *testing.T, mapper reconcile.DependencyMapper) (pbresource.ResourceServiceClient, *prometheus.Registry, <-chan reconcile.Request) {
	t.Helper()
	svc := startService(t)
	writeBar(t, svc.Client, "ready", "x", nil)
	reg := prometheus.NewRegistry()
	reconciled := make(chan reconcile.Request, 100)
	m := newManager(t, svc.Client, controller.WithMetrics(reg))
	m.MustRegister(controller.NewController("mapped", foo.BarV1Type).
		WithBackoff(time.Millisecond, 4*time.Millisecond).
		WithWatch(foo.ZipType, mapper).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			reconciled <- req
			return nil
		})))
	m.SetLeader(true)
	runManager(t, m)
	waitReconciled(t, reconciled, "ready")
	return svc.Client, reg, reconciled
}

// waitReconciled waits until name is reconciled and returns the requests
// reconciled before it.
func waitReconciled(t *testing.T, reconciled <-chan reconcile.Request, name string) []reconcile.Request {
	t.Helper()
	var before []reconcile.Request
	deadline := time.After(10 * time.Second)
	for {
		select {
		case req := <-reconciled:
			if req.ID.GetName() == name {
				return before
			}
			before = append(before, req)
		case <-deadline:
			t.Fatalf("%q was not reconciled in 10 s; reconciled meanwhile: %v", name, before)
		}
	}
}

func writeZipZap(t *testing.T, client pbresource.ResourceServiceClient, name, zap string) {
	t.Helper()
	data, err := anypb.New(&pbfoov1.Zip{Zap: zap})
	require.NoError(t, err)
	_, err = client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: zipID(name), Data: data}})
	require.NoError(t, err)
}

// A mapper that fails more often than any fixed retry limit still delivers
// the change once it succeeds, and every failure is counted.
func TestFailingMapperIsRetriedUntilItSucceeds(t *testing.T) {
	const failures = 12
	var calls atomic.Int32
	client, reg, reconciled := mapperHarness(t, func(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
		if calls.Add(1) <= failures {
			return nil, errors.New("index not ready")
		}
		return []reconcile.Request{{ID: barID("for-" + res.Id.Name)}}, nil
	})
	writeZip(t, client, "z1")
	waitReconciled(t, reconciled, "for-z1")
	assert.Equal(t, int32(failures+1), calls.Load())
	assert.Equal(t, float64(failures), counterValue(t, reg, "loom_controller_mapper_errors_total", "controller", "mapped"))
}

// A panicking mapper is recovered and retried like a failing one.
func TestPanickingMapperIsRetried(t *testing.T) {
	var calls atomic.Int32
	client, reg, reconciled := mapperHarness(t, func(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
		if calls.Add(1) <= 2 {
			panic("mapper bug")
		}
		return []reconcile.Request{{ID: barID("for-" + res.Id.Name)}}, nil
	})
	writeZip(t, client, "z1")
	waitReconciled(t, reconciled, "for-z1")
	assert.Equal(t, 2.0, counterValue(t, reg, "loom_controller_mapper_errors_total"))
}

// A change whose mapper keeps failing does not hold up the changes after
// it.
func TestFailingChangeDoesNotBlockOthers(t *testing.T) {
	client, reg, reconciled := mapperHarness(t, func(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
		if res.Id.Name == "bad" {
			return nil, errors.New("always fails")
		}
		return []reconcile.Request{{ID: barID("for-" + res.Id.Name)}}, nil
	})
	writeZip(t, client, "bad")
	writeZip(t, client, "good")
	waitReconciled(t, reconciled, "for-good")
	require.Eventually(t, func() bool {
		return counterValue(t, reg, "loom_controller_mapper_errors_total") >= 3
	}, 10*time.Second, time.Millisecond, "the failing change is retried")
}

// A newer change of a resource takes the place of its failed change: once
// it maps, the failed one is not retried any more.
func TestNewerChangeSupersedesFailedOne(t *testing.T) {
	var staleCalls atomic.Int32
	client, _, reconciled := mapperHarness(t, dependency.MapDecoded(func(ctx context.Context, rt reconcile.Runtime, zip *resource.Decoded[*pbfoov1.Zip]) ([]reconcile.Request, error) {
		if zip.Data.Zap == "v1" {
			staleCalls.Add(1)
			return nil, errors.New("fails for v1")
		}
		return []reconcile.Request{{ID: barID("for-" + zip.Data.Zap)}}, nil
	}))
	writeZipZap(t, client, "z", "v1")
	require.Eventually(t, func() bool { return staleCalls.Load() >= 2 }, 10*time.Second, time.Millisecond)
	writeZipZap(t, client, "z", "v2")
	waitReconciled(t, reconciled, "for-v2")
	// Mappers run one at a time, so v1 is not mapped again after v2 was.
	// Further changes pass through the mapper goroutine meanwhile, long
	// enough for a leftover retry (backoff at most 4 ms) to show.
	n := staleCalls.Load()
	for _, m := range []string{"m0", "m1", "m2"} {
		writeZipZap(t, client, "marker", m)
		waitReconciled(t, reconciled, "for-"+m)
	}
	assert.Equal(t, n, staleCalls.Load(), "the superseded change was retried")
}

// Requests for another type than the managed one are refused and counted;
// the mapper's other requests are queued.
func TestMapperRequestForOtherTypeIsRefused(t *testing.T) {
	client, reg, reconciled := mapperHarness(t, func(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
		return []reconcile.Request{{ID: zipID(res.Id.Name)}, {ID: barID("for-" + res.Id.Name)}}, nil
	})
	writeZip(t, client, "z1")
	before := waitReconciled(t, reconciled, "for-z1")
	for _, req := range before {
		assert.True(t, resource.EqualUnversionedType(req.ID.Type, foo.BarV1Type), "reconciled %s", resource.IDString(req.ID))
	}
	assert.Equal(t, 1.0, counterValue(t, reg, "loom_controller_mapper_invalid_requests_total", "controller", "mapped"))
	assert.Zero(t, counterValue(t, reg, "loom_controller_mapper_errors_total"))
}
