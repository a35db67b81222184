package queue

import (
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a Queue's clock that moves only when told to.
type fakeClock struct{ now int64 }

func (c *fakeClock) read() int64             { return c.now }
func (c *fakeClock) advance(d time.Duration) { c.now += int64(d) }

// newFakeClocked returns a queue whose aging runs on the returned clock.
func newFakeClocked(opts Options) (*Queue[string, int], *fakeClock) {
	q := New[string, int](opts)
	c := &fakeClock{now: 1}
	q.mu.Lock()
	q.clock = c.read
	q.mu.Unlock()
	return q, c
}

// getAll hands out and finishes every ready key, returning them in order
// with the priority each was handed out at.
func getAll(q *Queue[string, int]) []string {
	var out []string
	for q.Len() > 0 {
		got, _ := q.Get()
		out = append(out, got.Key+"/"+got.Priority.String())
		q.Done(got)
	}
	return out
}

func TestNormalBeforeLow(t *testing.T) {
	q, _ := newFakeClocked(Options{})
	q.AddPriority("l1", 0, Low)
	q.Add("n1", 0)
	q.AddPriority("l2", 0, Low)
	q.AddPriority("n2", 0, Normal)
	assert.Equal(t, 4, q.Len())
	assert.Equal(t, []string{"n1/normal", "n2/normal", "l1/low", "l2/low"}, getAll(q))
}

// A key waiting at Low is raised by an add at Normal (and keeps its place
// among the Normal keys from then on); an add at Low never lowers a key.
func TestReAddRaisesNeverLowers(t *testing.T) {
	q, _ := newFakeClocked(Options{})
	q.AddPriority("a", 1, Low)
	q.AddPriority("b", 1, Low)
	q.Add("c", 1)
	q.AddPriority("b", 2, Normal)
	q.AddPriority("c", 2, Low)
	assert.Equal(t, 3, q.Len(), "de-duplicated across priorities")
	got, _ := q.Get()
	assert.Equal(t, "c", got.Key)
	assert.Equal(t, 2, got.Value, "the latest value wins")
	assert.Equal(t, Normal, got.Priority, "not lowered")
	q.Done(got)
	got, _ = q.Get()
	assert.Equal(t, "b", got.Key)
	assert.Equal(t, Normal, got.Priority, "raised")
	q.Done(got)
	assert.Equal(t, []string{"a/low"}, getAll(q))

	// While in progress, the pending add keeps the higher priority too.
	q.AddPriority("k", 1, Low)
	got, _ = q.Get()
	q.Add("k", 2)
	q.AddPriority("k", 3, Low)
	q.AddPriority("x", 1, Low)
	q.Done(got)
	assert.Equal(t, []string{"k/normal", "x/low"}, getAll(q))
}

// Once the oldest Low key has waited the aging bound, Low and Normal keys
// take turns; before, Normal keys go first.
func TestAgingTakesTurns(t *testing.T) {
	q, clock := newFakeClocked(Options{AgingBound: time.Second})
	for i := 0; i < 3; i++ {
		q.AddPriority(fmt.Sprintf("l%d", i), 0, Low)
	}
	for i := 0; i < 6; i++ {
		q.Add(fmt.Sprintf("n%d", i), 0)
	}
	got, _ := q.Get()
	assert.Equal(t, "n0", got.Key, "not aged yet")
	q.Done(got)
	clock.advance(999 * time.Millisecond)
	got, _ = q.Get()
	assert.Equal(t, "n1", got.Key, "not aged yet")
	q.Done(got)
	clock.advance(time.Millisecond)
	assert.Equal(t, []string{"l0/low", "n2/normal", "l1/low", "n3/normal", "l2/low", "n4/normal", "n5/normal"}, getAll(q))

	// A Low key that has waited the bound is not raised by a Normal add,
	// which would put it behind the Normal keys.
	q.AddPriority("old", 0, Low)
	q.Add("n6", 0)
	clock.advance(time.Second)
	q.Add("old", 1)
	assert.Equal(t, []string{"old/low", "n6/normal"}, getAll(q))
}

// The aging bound, as a property: under a load of Normal keys that keeps
// the workers saturated (one hand-out per tick of the clock, and at least
// one new Normal key per tick), every Low key is handed out within
// AgingBound plus two hand-outs per Low key waiting ahead of it when it
// was queued. Keys are re-added at random, at either priority, while
// waiting and while in progress.
func TestAgingBoundUnderSaturation(t *testing.T) {
	const bound, tick = 50 * time.Millisecond, time.Millisecond
	for seed := int64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewSource(seed))
			q, clock := newFakeClocked(Options{AgingBound: bound})
			type lowKey struct {
				queued time.Duration
				ahead  int
			}
			waiting := map[string]lowKey{} // Low keys not handed out yet
			var elapsed time.Duration
			normal, low := 0, 0
			var inProgress []Item[string, int]
			for step := 0; step < 3000; step++ {
				for i := 1 + rng.Intn(3); i > 0; i-- {
					normal++
					q.Add(fmt.Sprintf("n%d", normal), step)
				}
				if rng.Intn(10) == 0 {
					for i := rng.Intn(20); i > 0; i-- {
						low++
						k := fmt.Sprintf("l%d", low)
						q.mu.Lock()
						ahead := q.nLow
						q.mu.Unlock()
						q.AddPriority(k, step, Low)
						waiting[k] = lowKey{queued: elapsed, ahead: ahead}
					}
				}
				if rng.Intn(4) == 0 && normal > 0 {
					// A re-add of a recent key, waiting or in progress.
					q.AddPriority(fmt.Sprintf("n%d", normal-rng.Intn(min(normal, 5))), step, Low)
				}
				got, ok := q.Get()
				require.True(t, ok)
				if lk, ok := waiting[got.Key]; ok {
					delete(waiting, got.Key)
					limit := bound + time.Duration(2*(lk.ahead+1))*tick
					require.LessOrEqual(t, elapsed-lk.queued, limit, "low key %s waited too long (%d ahead)", got.Key, lk.ahead)
				}
				inProgress = append(inProgress, got)
				if len(inProgress) > 2 {
					q.Done(inProgress[0])
					inProgress = inProgress[1:]
				}
				clock.advance(tick)
				elapsed += tick
			}
			// The rest stay bounded too.
			for len(waiting) > 0 {
				got, _ := q.Get()
				if lk, ok := waiting[got.Key]; ok {
					delete(waiting, got.Key)
					require.LessOrEqual(t, elapsed-lk.queued, bound+time.Duration(2*(lk.ahead+1))*tick)
				}
				q.Done(got)
				clock.advance(tick)
				elapsed += tick
			}
		})
	}
}

// Retries after a backoff go in at Low; a delayed add keeps the priority it
// was made at, and the higher one when the key is delayed already.
func TestDelayedPriorities(t *testing.T) {
	q := New[string, int](Options{BaseDelay: time.Millisecond})
	q.AddRateLimited("retry", 1)
	q.AddAfterPriority("kept", 1, 2*time.Millisecond, Low)
	q.AddAfterPriority("raised", 1, 2*time.Millisecond, Low)
	q.AddAfterPriority("raised", 2, time.Hour, Normal)
	q.AddAfter("normal", 1, 2*time.Millisecond)
	require.Eventually(t, func() bool { return q.Len() == 4 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, []string{"raised/normal", "normal/normal", "retry/low", "kept/low"}, getAll(q))
}

// A gated key added at Low goes to the Low keys when its gate opens.
func TestGatedLowKey(t *testing.T) {
	q, _ := newFakeClocked(Options{})
	q.Add("k", 0)
	got, _ := q.Get()
	g := &testGate{}
	q.DoneGated(got, time.Time{}, g)
	q.AddPriority("k", 1, Low)
	q.Add("n", 1)
	assert.Equal(t, 1, q.Len(), "held by its gate")
	g.release()
	assert.Equal(t, []string{"n/normal", "k/low"}, getAll(q))
}

// The depth metric has a series per priority.
func TestDepthByPriority(t *testing.T) {
	reg := prometheus.NewRegistry()
	v, err := NewMetricsVec(reg)
	require.NoError(t, err)
	q, _ := newFakeClocked(Options{Metrics: v.For("c")})
	q.AddPriority("a", 0, Low)
	q.AddPriority("b", 0, Low)
	q.Add("c", 0)
	assert.Equal(t, 1.0, testutil.ToFloat64(v.depth.WithLabelValues("c", "c", "normal")))
	assert.Equal(t, 2.0, testutil.ToFloat64(v.depth.WithLabelValues("c", "c", "low")))
	q.Add("a", 0) // raised
	assert.Equal(t, 2.0, testutil.ToFloat64(v.depth.WithLabelValues("c", "c", "normal")))
	assert.Equal(t, 1.0, testutil.ToFloat64(v.depth.WithLabelValues("c", "c", "low")))
	getAll(q)
	assert.Zero(t, testutil.ToFloat64(v.depth.WithLabelValues("c", "c", "normal")))
	assert.Zero(t, testutil.ToFloat64(v.depth.WithLabelValues("c", "c", "low")))
}

// ShutDownNow drops waiting keys of both priorities, stale entries too.
func TestShutDownNowDropsBothPriorities(t *testing.T) {
	q, _ := newFakeClocked(Options{})
	q.AddPriority("a", 0, Low)
	q.AddPriority("b", 0, Low)
	q.Add("a", 0)
	q.Add("c", 0)
	q.ShutDownNow()
	_, ok := q.Get()
	assert.False(t, ok)
	assert.True(t, q.Idle())
}

// Emptying a ring drops its entries (the stale ones of the Low ring) and
// leaves it ready for use.
func TestLowRingReset(t *testing.T) {
	var r ring[int]
	for i := 1; i <= 100; i++ {
		r.push(i)
	}
	r.pop()
	r.reset()
	assert.Zero(t, r.n)
	assert.Zero(t, r.head)
	for i, v := range r.buf {
		require.Zero(t, v, "slot %d", i)
	}
	r.push(7)
	assert.Equal(t, 7, r.pop())
}
