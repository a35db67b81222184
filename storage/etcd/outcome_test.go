package etcd

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// stallingWrites stalls its proxy as each write starts: the write reaches
// etcd, its answer does not come back.
type stallingWrites struct {
	*Backend
	p *proxy
}

func (s stallingWrites) WriteCAS(ctx context.Context, res *pbresource.Resource) (*pbresource.Resource, error) {
	s.p.setStalled(true)
	return s.Backend.WriteCAS(ctx, res)
}

// TestWriteOutcomeUnknownWithinDeadline writes through the ResourceService
// while etcd's answers stall (as when the cluster loses its quorum with the
// request in flight): the client gets Unavailable "outcome unknown", with
// how to check, before its deadline, not DeadlineExceeded at it. The write
// did reach etcd, and reading the resource afterwards shows it landed.
func TestWriteOutcomeUnknownWithinDeadline(t *testing.T) {
	p := newProxy(t)
	be := New(p.client(t), WithPrefix(newPrefix()))
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	client := server.NewInProcessClient(server.New(server.Config{Backend: stallingWrites{be, p}, Registry: reg}))

	data, err := anypb.New(&pbfoov1.Bar{Baz: "x"})
	require.NoError(t, err)
	id := &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: "stalled"}
	const deadline = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}})
	elapsed := time.Since(start)

	require.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), "outcome unknown")
	require.Contains(t, status.Convert(err).Message(), "read the resource and compare its version")
	require.Less(t, elapsed, deadline, "the answer came after the client's deadline")
	require.NoError(t, ctx.Err(), "the answer came after the client's deadline")

	// Once etcd answers again, a read tells what happened: here the write
	// had landed.
	p.setStalled(false)
	rsp, err := client.Read(testContext(t), &pbresource.ReadRequest{Id: id})
	require.NoError(t, err)
	require.NotEmpty(t, rsp.Resource.Version)
}

// TestCallTimeout stalls etcd's answers for a caller without a deadline:
// the call timeout ends a write with storage.ErrOutcomeUnknown and a read
// with storage.ErrInconsistent (neither a context error: the caller still
// waits), and the metrics count them as unavailable.
func TestCallTimeout(t *testing.T) {
	p := newProxy(t)
	const timeout = 300 * time.Millisecond
	b := New(p.client(t), WithPrefix(newPrefix()), WithCallTimeout(timeout))
	stored, err := b.WriteCAS(testContext(t), newWidget("w"))
	require.NoError(t, err)
	require.Equal(t, uint64(1), requestCount(t, b, "txn"))
	require.Zero(t, testutil.ToFloat64(b.metrics.unavailable))

	p.setStalled(true)
	ctx := context.Background()
	start := time.Now()
	_, err = b.WriteCAS(ctx, newWidget("x"))
	require.ErrorIs(t, err, storage.ErrOutcomeUnknown)
	require.NotErrorIs(t, err, context.DeadlineExceeded)
	require.Contains(t, err.Error(), "etcd did not answer in time within 300ms")
	require.Less(t, time.Since(start), 10*timeout)

	_, err = b.Read(ctx, storage.StrongConsistency, stored.Id)
	require.ErrorIs(t, err, storage.ErrInconsistent)
	require.NotErrorIs(t, err, context.DeadlineExceeded)

	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.errors.WithLabelValues("txn", "timeout")))
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.errors.WithLabelValues("get", "timeout")))
	require.Equal(t, 2.0, testutil.ToFloat64(b.metrics.unavailable))

	// A caller that gives up first gets its own context's error, counted
	// as canceled, not as etcd being unavailable.
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = b.Read(cctx, storage.StrongConsistency, stored.Id)
	require.True(t, errors.Is(err, context.Canceled), "%v", err)
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.errors.WithLabelValues("get", "canceled")))
	require.Equal(t, 2.0, testutil.ToFloat64(b.metrics.unavailable))
}

// TestCallMetrics checks the request metrics move with requests and
// retries, with labels from their fixed sets.
func TestCallMetrics(t *testing.T) {
	b := newTestBackend(t)
	ctx := testContext(t)
	w := mustWrite(t, b, newWidget("m"))
	_, err := b.Read(ctx, storage.EventualConsistency, w.Id)
	require.NoError(t, err)

	// A stale version: the fast path's compare fails, and the slow path
	// reads and answers ErrCASFailure.
	stale := touch(t, b, w, "v2")
	stale.Version = w.Version
	stale.Metadata["k"] = "v3"
	_, err = b.WriteCAS(ctx, stale)
	require.ErrorIs(t, err, storage.ErrCASFailure)
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.byRetry[retryCompareFailed]))

	b.observe(1 << 40) // a member behind what the backend saw: the read goes to the leader
	_, _ = b.Read(ctx, storage.EventualConsistency, w.Id)
	require.Equal(t, 1.0, testutil.ToFloat64(b.metrics.byRetry[retryStaleMember]))

	require.Equal(t, uint64(3), requestCount(t, b, "txn"), "the write, the touch and the failed fast path")
	require.Positive(t, requestCount(t, b, "get"), "the slow path's read, the read from the leader")
	require.Positive(t, requestCount(t, b, "get_serializable"))
	n, err := testutil.GatherAndCount(registryOf(t, b), "loom_storage_etcd_request_duration_seconds", "loom_storage_etcd_retries_total")
	require.NoError(t, err)
	require.Equal(t, int(numOps)+int(numRetries), n, "one series per kind of request and per retry reason")
}

// registryOf returns a registry holding b's metrics.
func registryOf(t *testing.T, b *Backend) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(b.Metrics()))
	return reg
}

// requestCount returns how many requests of kind op b's latency histogram
// has observed, read through a registry as a scrape would.
func requestCount(t *testing.T, b *Backend, op string) uint64 {
	t.Helper()
	families, err := registryOf(t, b).Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "loom_storage_etcd_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					return m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	t.Fatalf("no latency series for op %q", op)
	return 0
}
