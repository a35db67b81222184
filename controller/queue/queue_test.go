package queue

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDedupWhileWaiting(t *testing.T) {
	q := New[string, int](Options{})
	q.Add("a", 1)
	q.Add("b", 1)
	q.Add("a", 2)
	require.Equal(t, 2, q.Len())

	got, ok := q.Get()
	require.True(t, ok)
	assert.Equal(t, "a", got.Key)
	assert.Equal(t, 2, got.Value, "the latest value wins")
	q.Done(got)
	got, _ = q.Get()
	assert.Equal(t, "b", got.Key)
	q.Done(got)
	assert.Equal(t, 0, q.Len())
}

func TestReAddWhileProcessingRunsAfterDone(t *testing.T) {
	q := New[string, int](Options{})
	q.Add("a", 1)
	got, _ := q.Get()
	q.Add("a", 2)
	assert.Equal(t, 0, q.Len(), "a key in progress is not handed out again")
	q.Done(got)
	q.Done(got) // a second Done is harmless
	require.Equal(t, 1, q.Len())
	got, _ = q.Get()
	assert.Equal(t, 2, got.Value)
}

func TestNoKeyOnTwoWorkers(t *testing.T) {
	q := New[int, int](Options{})
	var busy [10]atomic.Int32
	var handled atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				got, ok := q.Get()
				if !ok {
					return
				}
				k := got.Key
				if busy[k].Add(1) != 1 {
					t.Errorf("key %d on two workers", k)
				}
				handled.Add(1)
				busy[k].Add(-1)
				q.Done(got)
			}
		}()
	}
	for i := 0; i < 20000; i++ {
		q.Add(i%10, i)
	}
	require.Eventually(t, func() bool { return q.Idle() }, 5*time.Second, time.Millisecond)
	q.ShutDown()
	wg.Wait()
	assert.GreaterOrEqual(t, handled.Load(), int64(10))
}

func TestAddAfter(t *testing.T) {
	q := New[string, int](Options{})
	start := time.Now()
	q.AddAfter("late", 1, 40*time.Millisecond)
	q.AddAfter("early", 1, 10*time.Millisecond)
	q.AddAfter("late", 2, time.Hour) // a later time does not postpone it
	got, _ := q.Get()
	assert.Equal(t, "early", got.Key)
	q.Done(got)
	got, _ = q.Get()
	assert.Equal(t, "late", got.Key)
	assert.Equal(t, 2, got.Value)
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
}

func TestBackoffGrowsAndResets(t *testing.T) {
	q := New[string, int](Options{BaseDelay: time.Millisecond, MaxDelay: 8 * time.Millisecond})
	var got []time.Duration
	for i := 0; i < 6; i++ {
		got = append(got, q.backoffs.next("k"))
	}
	assert.Equal(t, []time.Duration{1, 2, 4, 8, 8, 8}, scale(got, time.Millisecond))
	assert.Equal(t, 6, q.NumRequeues("k"))
	q.Forget("k")
	assert.Equal(t, 0, q.NumRequeues("k"))
	assert.Equal(t, time.Millisecond, q.backoffs.next("k"))

	// AddRateLimited really waits: after three failures the next retry
	// waits 8 ms.
	q.Forget("k")
	for i := 0; i < 3; i++ {
		q.AddRateLimited("k", 0)
		item, _ := q.Get()
		q.Done(item)
	}
	start := time.Now()
	q.AddRateLimited("k", 0)
	item, _ := q.Get()
	q.Done(item)
	assert.Equal(t, "k", item.Key)
	assert.GreaterOrEqual(t, time.Since(start), 8*time.Millisecond)
	assert.Equal(t, 4, q.NumRequeues("k"))
}

func scale(ds []time.Duration, unit time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d / unit
	}
	return out
}

func TestShutDown(t *testing.T) {
	q := New[string, int](Options{})
	q.Add("a", 1)
	q.AddAfter("b", 1, time.Millisecond)
	q.ShutDown()
	q.Add("c", 1)
	got, ok := q.Get()
	require.True(t, ok, "ready keys drain after shut down")
	assert.Equal(t, "a", got.Key)
	q.Done(got)
	_, ok = q.Get()
	assert.False(t, ok)

	q2 := New[string, int](Options{})
	done := make(chan struct{})
	go func() {
		_, ok := q2.Get()
		assert.False(t, ok)
		close(done)
	}()
	q2.ShutDownNow()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a blocked Get did not return on shut down")
	}
}

func TestMetrics(t *testing.T) {
	m := &Metrics{
		Depth:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "d"}),
		Adds:         prometheus.NewCounter(prometheus.CounterOpts{Name: "a"}),
		QueueLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "l"}),
		WorkDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "w"}),
		Retries:      prometheus.NewCounter(prometheus.CounterOpts{Name: "r"}),
	}
	q := New[string, int](Options{Metrics: m, BaseDelay: time.Millisecond})
	q.Add("a", 1)
	q.Add("a", 1)
	q.Add("b", 1)
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Adds))
	assert.Equal(t, 2.0, testutil.ToFloat64(m.Depth))
	got, _ := q.Get()
	q.Done(got)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Depth))
	q.AddRateLimited("c", 1)
	assert.Equal(t, 1.0, testutil.ToFloat64(m.Retries))
}
