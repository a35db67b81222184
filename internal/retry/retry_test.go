package retry

import (
	"testing"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/stretchr/testify/assert"
)

func TestNewBackOffDoublesToMaxAndNeverStops(t *testing.T) {
	b := NewBackOff(time.Millisecond, 8*time.Millisecond)
	var got []time.Duration
	for i := 0; i < 6; i++ {
		got = append(got, b.NextBackOff())
	}
	ms := time.Millisecond
	assert.Equal(t, []time.Duration{ms, 2 * ms, 4 * ms, 8 * ms, 8 * ms, 8 * ms}, got)
	for i := 0; i < 1000; i++ {
		assert.NotEqual(t, backoff.Stop, b.NextBackOff())
	}
}

func TestNewBackOffOptionsOverride(t *testing.T) {
	b := NewBackOff(100*time.Millisecond, time.Second, backoff.WithRandomizationFactor(0.5))
	d := b.NextBackOff()
	assert.GreaterOrEqual(t, d, 50*time.Millisecond)
	assert.LessOrEqual(t, d, 150*time.Millisecond)
}
