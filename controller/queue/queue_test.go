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
	// Not yet due at ShutDown, however loaded the machine (with a
	// millisecond it could come due first and be drained like "a").
	q.AddAfter("b", 1, time.Hour)
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

// A key that went idle is parked: still idle to Idle, found again by a
// later Add, and released once parkSize newer keys went idle after it.
func TestParkedKeys(t *testing.T) {
	q := New[int, int](Options{})
	q.Add(0, 1)
	got, _ := q.Get()
	q.Done(got)
	assert.True(t, q.Idle(), "a parked key does not count")
	parked := q.items[0]
	require.NotNil(t, parked, "the idle key stays in items")

	q.Add(0, 2)
	assert.False(t, q.Idle())
	got, _ = q.Get()
	assert.Equal(t, 2, got.Value)
	assert.Same(t, parked, got.it, "the parked item is reused")
	q.Done(got)
	assert.True(t, q.Idle())

	for k := 1; k <= parkSize; k++ {
		q.Add(k, k)
		got, _ := q.Get()
		q.Done(got)
	}
	assert.True(t, q.Idle())
	assert.NotContains(t, q.items, 0, "the oldest parked key is released when the ring is full")
	assert.Len(t, q.items, parkSize)
	assert.Equal(t, parkSize, q.nParked)

	// Re-adding a parked key while the ring holds a stale entry for it, then
	// letting it go idle again, keeps one live entry per key.
	q.Add(1, 1)
	got, _ = q.Get()
	q.Done(got)
	assert.Len(t, q.items, parkSize)
	assert.Equal(t, parkSize, q.nParked)
	assert.True(t, q.Idle())

	// A delayed or failed key is not idle while it waits.
	q.AddAfter(2, 1, time.Hour)
	assert.False(t, q.Idle())
	q.ShutDown()
	assert.True(t, q.Idle())
}

// After a burst of more than shrinkAfter keys, the queue drops its parked
// keys once nothing is active, so the map can be made anew.
func TestParkedKeysReleasedAfterBurst(t *testing.T) {
	q := New[int, int](Options{})
	for k := 0; k <= shrinkAfter; k++ {
		q.Add(k, k)
	}
	for k := 0; k <= shrinkAfter; k++ {
		got, _ := q.Get()
		q.Done(got)
	}
	assert.True(t, q.Idle())
	assert.Empty(t, q.items)
	assert.Zero(t, q.nParked)
	assert.Zero(t, q.peak, "the map was made anew")
}

// Get stamps the item with the time it was handed out (with metrics on), and
// DoneAt takes the caller's reading of the clock as the end of the work.
func TestStartedAndDoneAt(t *testing.T) {
	work := &observations{}
	m := &Metrics{
		Depth:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "d"}),
		Adds:         prometheus.NewCounter(prometheus.CounterOpts{Name: "a"}),
		QueueLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "l"}),
		WorkDuration: work,
		Retries:      prometheus.NewCounter(prometheus.CounterOpts{Name: "r"}),
	}
	q := New[string, int](Options{Metrics: m})
	before := time.Now()
	q.Add("a", 1)
	got, _ := q.Get()
	assert.False(t, got.Started.Before(before))
	q.DoneAt(got, got.Started.Add(5*time.Second))
	assert.Equal(t, []float64{5}, work.values)

	plain := New[string, int](Options{})
	plain.Add("a", 1)
	got, _ = plain.Get()
	assert.True(t, got.Started.IsZero(), "no clock reading without metrics")
	plain.Done(got)
}

// Forget without a failing key takes no lock; with one it clears it.
func TestForget(t *testing.T) {
	q := New[string, int](Options{BaseDelay: time.Millisecond})
	q.Forget("a")
	assert.True(t, q.backoffs.none())
	q.AddRateLimited("a", 1)
	q.AddRateLimited("b", 1)
	assert.False(t, q.backoffs.none())
	q.Forget("a")
	assert.Equal(t, 0, q.NumRequeues("a"))
	assert.Equal(t, 1, q.NumRequeues("b"))
	assert.False(t, q.backoffs.none())
	q.Forget("b")
	assert.True(t, q.backoffs.none())
}

// observations is a prometheus.Observer that keeps what it is given.
type observations struct{ values []float64 }

func (o *observations) Observe(v float64) { o.values = append(o.values, v) }

// TestAddRetry: the first failure since the last Forget is queued at once
// (and, while the key is in progress, after Done), the next ones back off
// from BaseDelay; only the delayed ones count as retries.
func TestAddRetry(t *testing.T) {
	retries := prometheus.NewCounter(prometheus.CounterOpts{Name: "r"})
	m := &Metrics{
		Depth:        prometheus.NewGauge(prometheus.GaugeOpts{Name: "d"}),
		Adds:         prometheus.NewCounter(prometheus.CounterOpts{Name: "a"}),
		QueueLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "l"}),
		WorkDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "w"}),
		Retries:      retries,
	}
	q := New[string, int](Options{Metrics: m, BaseDelay: 20 * time.Millisecond, MaxDelay: time.Second})
	q.Add("k", 0)
	item, _ := q.Get()
	require.True(t, q.AddRetry("k", 1, Normal), "the first failure goes at once")
	require.Equal(t, 0, q.Len(), "not while in progress")
	q.Done(item)
	require.Equal(t, 1, q.Len())
	assert.Equal(t, 1, q.NumRequeues("k"))
	assert.Zero(t, testutil.ToFloat64(retries))

	item, _ = q.Get()
	assert.Equal(t, 1, item.Value)
	start := time.Now()
	require.False(t, q.AddRetry("k", 2, Normal), "the second one backs off")
	q.Done(item)
	assert.Equal(t, 0, q.Len())
	item, _ = q.Get()
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "the backoff's first delay")
	assert.Equal(t, 2, item.Value)
	assert.Equal(t, 2, q.NumRequeues("k"))
	assert.Equal(t, 1.0, testutil.ToFloat64(retries))

	// A success in between: at once again.
	q.Forget("k")
	require.True(t, q.AddRetry("k", 3, Normal))
	q.Done(item)
	item, _ = q.Get()
	assert.Equal(t, 3, item.Value)
	q.Done(item)
}
