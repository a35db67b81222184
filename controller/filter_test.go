package controller_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/predicate"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func acceptedStatus(generation string) *pbresource.Status {
	return &pbresource.Status{ObservedGeneration: generation, Conditions: []*pbresource.Condition{{Type: "Accepted", State: pbresource.Condition_STATE_TRUE}}}
}

// statusWriter is a Bar controller that writes its status "own" and
// counts, per name, the reconciles started and returned.
type statusWriter struct {
	started, returned counter
}

func (s *statusWriter) Reconcile(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
	s.started.inc(req.ID.Name)
	defer s.returned.inc(req.ID.Name)
	res, err := rt.Cache.GetByID(req.ID)
	if err != nil || res == nil {
		return err
	}
	_, err = rt.WriteStatus(ctx, res, "own", acceptedStatus(""))
	return err
}

// waitBehind writes the marker Bars one after the other and waits until
// each was reconciled. With one worker and a FIFO queue, a request queued
// by an event that came before the first marker's (including the re-queue
// of a key dirtied while it was processed) has run by then.
// waitStarted waits until the controller runs: a Bar written now is
// reconciled, so the controller is subscribed to changes (what comes before
// is queued unfiltered when it starts).
func waitStarted(t *testing.T, client pbresource.ResourceServiceClient, reconciled func(name string) bool) {
	t.Helper()
	writeBar(t, client, "warm-up", "x", nil)
	require.Eventually(t, func() bool { return reconciled("warm-up") }, 5*time.Second, time.Millisecond)
}

func waitBehind(t *testing.T, client pbresource.ResourceServiceClient, s *statusWriter, markers ...string) {
	t.Helper()
	for _, mk := range markers {
		writeBar(t, client, mk, "x", nil)
		require.Eventually(t, func() bool { return s.returned.get(mk) > 0 }, 5*time.Second, time.Millisecond)
	}
}

func TestIgnoreOwnStatusDropsTheSelfTriggeredReconcile(t *testing.T) {
	for _, tc := range []struct {
		name    string
		filter  bool
		wantOwn int // reconciles of "a" after its own status write
	}{
		{"without filter", false, 2},
		{"with IgnoreOwnStatus", true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := startService(t)
			s := &statusWriter{}
			c := controller.NewController("bar", foo.BarV1Type).WithReconciler(s)
			if tc.filter {
				c.WithEventFilter(foo.BarV1Type, predicate.IgnoreOwnStatus("own"))
			}
			m := newManager(t, svc.Client)
			m.MustRegister(c)
			m.SetLeader(true)
			runManager(t, m)
			waitStarted(t, svc.Client, func(n string) bool { return s.returned.get(n) > 0 })

			a := writeBar(t, svc.Client, "a", "x", nil)
			require.Eventually(t, func() bool { return s.returned.get("a") > 0 }, 5*time.Second, time.Millisecond)
			waitBehind(t, svc.Client, s, "marker-1", "marker-2")
			assert.Equal(t, tc.wantOwn, s.started.get("a"))

			// Another writer's status key is a change the filter passes.
			before := s.started.get("a")
			_, err := svc.Client.WriteStatus(context.Background(), &pbresource.WriteStatusRequest{Id: a.Id, Key: "other", Status: acceptedStatus(a.Generation)})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return s.started.get("a") > before }, 5*time.Second, time.Millisecond)

			// So is a change of data (a new generation).
			before = s.started.get("a")
			writeBar(t, svc.Client, "a", "changed", nil)
			require.Eventually(t, func() bool { return s.started.get("a") > before }, 5*time.Second, time.Millisecond)
		})
	}
}

func TestGenerationChangedFiltersAWatchedType(t *testing.T) {
	svc := startService(t)
	var mapped, reconciled counter
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			reconciled.inc(req.ID.Name)
			return nil
		})).
		WithWatch(foo.ZipType, func(ctx context.Context, rt reconcile.Runtime, res *pbresource.Resource) ([]reconcile.Request, error) {
			mapped.inc(res.Id.Name)
			return nil, nil
		}).
		WithEventFilter(foo.ZipType, predicate.GenerationChanged()))
	m.SetLeader(true)
	runManager(t, m)
	waitStarted(t, svc.Client, func(n string) bool { return reconciled.get(n) > 0 })

	z := writeZip(t, svc.Client, "z")
	require.Eventually(t, func() bool { return mapped.get("z") == 1 }, 5*time.Second, time.Millisecond, "a creation passes")
	_, err := svc.Client.WriteStatus(context.Background(), &pbresource.WriteStatusRequest{Id: z.Id, Key: "other", Status: acceptedStatus(z.Generation)})
	require.NoError(t, err)
	// The mapper goroutine takes changes in order: once the marker is
	// mapped, the status write would have been too.
	writeZip(t, svc.Client, "marker")
	require.Eventually(t, func() bool { return mapped.get("marker") == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, 1, mapped.get("z"), "a status-only change is dropped")

	// A new metadata key is a new generation.
	_, err = svc.Client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id: z.Id, Data: z.Data, Metadata: map[string]string{"k": "v"},
	}})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return mapped.get("z") == 2 }, 5*time.Second, time.Millisecond, "a new generation passes")
	_, err = svc.Client.Delete(context.Background(), &pbresource.DeleteRequest{Id: zipID("z")})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return mapped.get("z") == 3 }, 5*time.Second, time.Millisecond, "a deletion passes")
}

func TestCustomEventFilterAndPanickingFilter(t *testing.T) {
	svc := startService(t)
	s := &statusWriter{}
	var olds atomic.Int32
	m := newManager(t, svc.Client)
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithReconciler(s).
		WithEventFilter(foo.BarV1Type,
			func(ev cache.Event) bool {
				if ev.Old != nil {
					olds.Add(1)
				}
				return true
			},
			func(ev cache.Event) bool {
				if ev.Resource.Id.Name == "boom" {
					panic("filter bug")
				}
				return !strings.HasPrefix(ev.Resource.Id.Name, "skip")
			}))
	m.SetLeader(true)
	runManager(t, m)
	waitStarted(t, svc.Client, func(n string) bool { return s.returned.get(n) > 0 })

	writeBar(t, svc.Client, "skip-1", "x", nil)
	writeBar(t, svc.Client, "boom", "x", nil)
	waitBehind(t, svc.Client, s, "keep")
	assert.Zero(t, s.started.get("skip-1"), "the custom filter dropped it")
	assert.Positive(t, s.returned.get("boom"), "a panicking filter lets the change pass")
	// Status writes (for boom and keep) are updates: the filter saw the
	// cache's previous copy.
	require.Eventually(t, func() bool { return olds.Load() >= 2 }, 5*time.Second, time.Millisecond)
}
