package queue

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testGate is a Gate the test opens by hand.
type testGate struct {
	open     bool
	openOnce bool // Wait finds it open (it opened meanwhile)
	waits    int
	wake     func()
	dropped  int
}

func (g *testGate) Drop() { g.dropped++ }

func (g *testGate) Open() bool { return g.open }

func (g *testGate) Wait(wake func()) bool {
	g.waits++
	if g.openOnce {
		return false
	}
	g.wake = wake
	return true
}

// release opens g and wakes its key, as a gate's waiter does.
func (g *testGate) release() {
	g.open = true
	g.wake()
}

func doneGated(t *testing.T, q *Queue[string, int], key string, g Gate) {
	t.Helper()
	q.Add(key, 1)
	got, ok := q.Get()
	require.True(t, ok)
	require.Equal(t, key, got.Key)
	q.DoneGated(got, got.Started, g)
}

func TestGateHoldsAKeyAddedWhileClosed(t *testing.T) {
	q := New[string, int](Options{})
	g := &testGate{}
	doneGated(t, q, "a", g)
	assert.True(t, q.Idle(), "a gated key that nobody adds is idle")
	assert.Zero(t, g.waits, "nobody waits on a gate until its key is added")

	q.Add("a", 2)
	q.Add("a", 3)
	assert.Zero(t, q.Len(), "a key behind a closed gate is not handed out")
	assert.False(t, q.Idle())
	assert.Equal(t, 1, g.waits, "one wait, however often the key is added")

	g.release()
	require.Equal(t, 1, q.Len())
	got, _ := q.Get()
	assert.Equal(t, 3, got.Value, "the latest value wins")
	q.Done(got)
	assert.True(t, q.Idle())
	assert.Equal(t, 1, g.dropped, "the queue lets go of the gate once")
}

func TestGateOpenWhenAddedCostsNoWait(t *testing.T) {
	q := New[string, int](Options{})
	g := &testGate{}
	doneGated(t, q, "a", g)
	g.open = true
	q.Add("a", 2)
	assert.Equal(t, 1, q.Len())
	assert.Zero(t, g.waits)
	got, _ := q.Get()
	q.Done(got)
	q.Add("a", 3)
	assert.Equal(t, 1, q.Len(), "an opened gate is dropped")
	assert.Equal(t, 1, g.dropped)
}

func TestGateOnAKeyAddedWhileInProgress(t *testing.T) {
	q := New[string, int](Options{})
	q.Add("a", 1)
	got, _ := q.Get()
	q.Add("a", 2)
	g := &testGate{}
	q.DoneGated(got, got.Started, g)
	assert.Zero(t, q.Len())
	assert.Equal(t, 1, g.waits)
	g.release()
	assert.Equal(t, 1, q.Len())

	// A gate that opened between Open and Wait lets the key go at once.
	got, _ = q.Get()
	q.Add("a", 3)
	q.DoneGated(got, got.Started, &testGate{openOnce: true})
	assert.Equal(t, 1, q.Len())
}

func TestEvictedGatedKeyKeepsItsGate(t *testing.T) {
	q := New[string, int](Options{})
	g := &testGate{}
	doneGated(t, q, "a", g)
	for k := 0; k < parkSize; k++ {
		doneGated(t, q, fmt.Sprint("k", k), nil)
	}
	require.Contains(t, q.items, "a", "an evicted key lingers while its gate is closed")
	assert.Zero(t, g.waits, "lingering costs no wait")
	assert.True(t, q.Idle(), "a lingering key is idle")

	q.Add("a", 2)
	assert.Zero(t, q.Len(), "the gate still holds the key")
	assert.Equal(t, 1, g.waits)
	g.release()
	assert.Equal(t, 1, q.Len())
	got, _ := q.Get()
	q.Done(got)

	// Evicted and never added again: the item goes once the gate opens,
	// when the queue next looks (another key going idle).
	g = &testGate{}
	doneGated(t, q, "b", g)
	for k := 0; k < parkSize; k++ {
		doneGated(t, q, fmt.Sprint("k", k), nil)
	}
	require.Contains(t, q.items, "b")
	doneGated(t, q, "c", nil)
	require.Contains(t, q.items, "b", "a closed gate keeps it")
	g.open = true
	doneGated(t, q, "d", nil)
	assert.NotContains(t, q.items, "b")
	assert.Equal(t, 1, g.dropped)
	assert.Zero(t, g.waits)
	assert.Empty(t, q.lingering[q.lingerHead:])
	assert.Zero(t, q.nLingering)
}

func TestGateWakeAfterShutDown(t *testing.T) {
	q := New[string, int](Options{})
	g := &testGate{}
	doneGated(t, q, "a", g)
	q.Add("a", 2)
	q.ShutDown()
	g.release()
	assert.True(t, q.Idle(), "a woken key is dropped once the queue is shut down")
	_, ok := q.Get()
	assert.False(t, ok)
	g.wake() // a second wake is harmless
	assert.Equal(t, 1, g.dropped)
}

func TestLingeringIsBounded(t *testing.T) {
	q := New[string, int](Options{})
	first := &testGate{}
	doneGated(t, q, "g-first", first)
	for k := 0; k < maxLingering+parkSize; k++ {
		doneGated(t, q, fmt.Sprint("g", k), &testGate{})
	}
	doneGated(t, q, "last", nil)
	assert.LessOrEqual(t, q.nLingering, maxLingering)
	assert.NotContains(t, q.items, "g-first", "the oldest lingering key goes past the bound")
	assert.Equal(t, 1, first.dropped)
}
