package foo_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

func runBarController(t *testing.T, client pbresource.ResourceServiceClient, opts ...controller.ManagerOption) *controller.Manager {
	t.Helper()
	m, err := controller.NewManager(client, nil, opts...)
	require.NoError(t, err)
	foo.RegisterControllers(m)
	m.SetLeader(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

// writeCounter counts the writes made through it.
type writeCounter struct {
	pbresource.ResourceServiceClient
	writes atomic.Int32
}

func (c *writeCounter) Write(ctx context.Context, in *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	c.writes.Add(1)
	return c.ResourceServiceClient.Write(ctx, in, opts...)
}

func (c *writeCounter) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	c.writes.Add(1)
	return c.ResourceServiceClient.WriteStatus(ctx, in, opts...)
}

func put(t *testing.T, client pbresource.ResourceServiceClient, res *pbresource.Resource) *pbresource.Resource {
	t.Helper()
	rsp, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: res})
	require.NoError(t, err)
	return rsp.Resource
}

func barRes(t *testing.T, name string, qux *pbresource.ID) *pbresource.Resource {
	data, err := anypb.New(&pbfoov1.Bar{Baz: "Some Baz", Qux: qux})
	require.NoError(t, err)
	return &pbresource.Resource{Id: &pbresource.ID{Type: foo.BarV1Type, Name: name}, Data: data}
}

func zipRes(t *testing.T, name string) *pbresource.Resource {
	data, err := anypb.New(&pbfoov1.Zip{Zap: "zap"})
	require.NoError(t, err)
	return &pbresource.Resource{Id: &pbresource.ID{Type: foo.ZipType, Name: name}, Data: data}
}

// condition waits until the Bar's status for its current generation has a
// condition of the given type, and returns the Bar and the condition.
func condition(t *testing.T, client pbresource.ResourceServiceClient, id *pbresource.ID, condType string, state pbresource.Condition_State) *pbresource.Resource {
	t.Helper()
	var last *pbresource.Resource
	ok := assert.Eventually(t, func() bool {
		rsp, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: id})
		if err != nil {
			return false
		}
		last = rsp.Resource
		st := last.Status[foo.StatusKey]
		if st == nil || st.ObservedGeneration != last.Generation {
			return false
		}
		for _, c := range st.Conditions {
			if c.Type == condType && c.State == state {
				return true
			}
		}
		return false
	}, 5*time.Second, 2*time.Millisecond)
	if !ok {
		t.Fatalf("condition %s=%s never appeared; last seen: %v", condType, state, last)
	}
	return last
}

func TestBarControllerResolvesZips(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	runBarController(t, client)

	// A Bar without qux is accepted and its refs are resolved.
	plain := put(t, client, barRes(t, "plain", nil))
	condition(t, client, plain.Id, foo.ConditionAccepted, pbresource.Condition_STATE_TRUE)
	got := condition(t, client, plain.Id, foo.ConditionResolvedRefs, pbresource.Condition_STATE_TRUE)
	assert.Contains(t, got.Metadata["finalizers"], foo.BarFinalizer)

	// A Bar naming a Zip that does not exist yet: MissingReference...
	ref := &pbresource.ID{Type: foo.ZipType, Name: "zap"}
	waiting := put(t, client, barRes(t, "waiting", ref))
	got = condition(t, client, waiting.Id, foo.ConditionResolvedRefs, pbresource.Condition_STATE_FALSE)
	for _, c := range got.Status[foo.StatusKey].Conditions {
		if c.Type == foo.ConditionResolvedRefs {
			assert.Equal(t, foo.ReasonMissingRef, c.Reason)
		}
	}

	// ...until the Zip appears, which flips it, and back when it goes.
	zip := put(t, client, zipRes(t, "zap"))
	condition(t, client, waiting.Id, foo.ConditionResolvedRefs, pbresource.Condition_STATE_TRUE)
	_, err := client.Delete(context.Background(), &pbresource.DeleteRequest{Id: zip.Id})
	require.NoError(t, err)
	condition(t, client, waiting.Id, foo.ConditionResolvedRefs, pbresource.Condition_STATE_FALSE)
}

func TestBarControllerSettlesAndReleasesDeletion(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	counted := &writeCounter{ResourceServiceClient: client}
	reg := prometheus.NewRegistry()
	m := runBarController(t, counted, controller.WithMetrics(reg))

	bar := put(t, client, barRes(t, "bar", nil))
	settled := condition(t, client, bar.Id, foo.ConditionResolvedRefs, pbresource.Condition_STATE_TRUE)
	writes := counted.writes.Load()
	assert.Equal(t, int32(2), writes, "one write for the finalizer, one for the status")

	// Settled: restarting the controller reconciles every Bar again, and
	// this time nothing is written.
	reconciles := func() float64 { return successfulReconciles(t, reg) }
	before := reconciles()
	m.SetLeader(false)
	m.SetLeader(true)
	require.Eventually(t, func() bool { return reconciles() > before }, 5*time.Second, 2*time.Millisecond)
	again, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: bar.Id})
	require.NoError(t, err)
	assert.Equal(t, settled.Version, again.Resource.Version)
	assert.Equal(t, writes, counted.writes.Load())

	// Deleting marks the Bar; the controller drops its finalizer and the
	// deletion completes.
	_, err = client.Delete(context.Background(), &pbresource.DeleteRequest{Id: bar.Id})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: bar.Id})
		return status.Code(err) == codes.NotFound
	}, 5*time.Second, 2*time.Millisecond)
}

// successfulReconciles reads the bar controller's count of successful
// reconciles from the Manager's metrics.
func successfulReconciles(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "loom_controller_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["controller"] == foo.BarControllerName && labels["result"] == "success" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
