package etcd

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/storage"
)

var _ controller.Lease = (*Lease)(nil)

// waitHeld waits until l.Held() is want.
func waitHeld(t *testing.T, l *Lease, want bool, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for l.Held() != want {
		select {
		case <-l.Changed():
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("lease Held did not become %v within %s", want, within)
		}
	}
}

func startLease(t *testing.T, ctx context.Context, key string, ttl time.Duration, value string) *Lease {
	t.Helper()
	l, err := NewLease(ctx, testClient, key, ttl, WithLeaseValue(value))
	require.NoError(t, err)
	return l
}

// TestLeaseHandOver elects one of two members, then hands over when the
// leader's context is cancelled: at once, not after the TTL.
func TestLeaseHandOver(t *testing.T) {
	key := newPrefix() + "/leader"
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a := startLease(t, ctxA, key, 10*time.Second, "a")
	waitHeld(t, a, true, 10*time.Second)

	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	b := startLease(t, ctxB, key, 10*time.Second, "b")
	time.Sleep(300 * time.Millisecond)
	require.False(t, b.Held(), "only one member leads")
	require.True(t, a.Held())

	fenceKey, rev, ok := a.Fence()
	require.True(t, ok)
	resp, err := testClient.Get(context.Background(), fenceKey)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, rev, resp.Kvs[0].CreateRevision)
	require.Equal(t, "a", string(resp.Kvs[0].Value))
	_, _, ok = b.Fence()
	require.False(t, ok)

	changed := a.Changed()
	start := time.Now()
	cancelA()
	<-changed
	require.False(t, a.Held())
	<-a.Done()
	waitHeld(t, b, true, 5*time.Second)
	require.Less(t, time.Since(start), 5*time.Second, "a resigning hands over without waiting for the TTL")
	_, _, ok = a.Fence()
	require.False(t, ok)
}

// TestLeaseStepsDownBeforeExpiry cuts the leader off from etcd and checks
// that it stops holding the lease before the other member is elected, and
// that at no moment both hold it.
func TestLeaseStepsDownBeforeExpiry(t *testing.T) {
	key := newPrefix() + "/leader"
	p := newProxy(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const ttl = 2 * time.Second
	a, err := NewLease(ctx, p.client(t), key, ttl, WithLeaseValue("a"))
	require.NoError(t, err)
	waitHeld(t, a, true, 10*time.Second)
	b := startLease(t, ctx, key, ttl, "b")

	// Watch both until b leads, recording when each changed.
	var both atomic.Bool
	var aLost, bWon time.Time
	var wg sync.WaitGroup
	stop := make(chan struct{})
	defer close(stop)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			ha, hb := a.Held(), b.Held()
			if ha && hb {
				both.Store(true)
			}
			now := time.Now()
			if !ha && aLost.IsZero() {
				aLost = now
			}
			if hb && bWon.IsZero() {
				bWon = now
				return
			}
			time.Sleep(time.Millisecond)
		}
	})

	changed := a.Changed()
	cut := time.Now()
	p.setCut(true)
	select {
	case <-changed:
	case <-time.After(ttl + time.Second):
		t.Fatal("the leader did not step down after losing etcd")
	}
	require.False(t, a.Held())
	waitHeld(t, b, true, 3*ttl)
	// The watcher returns by itself once it saw b lead.
	wg.Wait()

	require.False(t, both.Load(), "both members held the lease at once")
	require.False(t, aLost.IsZero())
	require.False(t, bWon.IsZero())
	require.True(t, aLost.Before(bWon), "a stepped down at %s, b was elected at %s", aLost.Sub(cut), bWon.Sub(cut))
	require.Less(t, aLost.Sub(cut), ttl, "a steps down within the TTL")
	t.Logf("after the cut: a stepped down at %s, b elected at %s", aLost.Sub(cut), bWon.Sub(cut))

	// Back online, a campaigns again and waits behind b.
	p.setCut(false)
	time.Sleep(500 * time.Millisecond)
	require.False(t, a.Held())
	require.True(t, b.Held())
}

// TestFencedWrites checks that writes made under a term's fence land while
// the term lasts and are refused once the lease moved to another member.
func TestFencedWrites(t *testing.T) {
	be := newTestBackend(t)
	key := be.ElectionKey()
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	a := startLease(t, ctxA, key, 10*time.Second, "a")
	waitHeld(t, a, true, 10*time.Second)
	fk, frev, ok := a.Fence()
	require.True(t, ok)
	fencedA := WithFence(context.Background(), fk, frev)

	x, err := be.WriteCAS(fencedA, newWidget("x"))
	require.NoError(t, err, "create under the current term")
	x2 := touch(t, be, x, "1")
	x2.Metadata["k"] = "2"
	x3, err := be.WriteCAS(fencedA, x2)
	require.NoError(t, err, "update under the current term")
	noUid := touch(t, be, x3, "3")
	noUid.Id.Uid = ""
	noUid.Metadata["k"] = "4"
	_, err = be.WriteCAS(fencedA, noUid)
	require.NoError(t, err, "slow-path update under the current term")

	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	b := startLease(t, ctxB, key, 10*time.Second, "b")
	cancelA()
	waitHeld(t, b, true, 5*time.Second)

	cur := newWidget("x")
	cur.Id.Uid = ""
	stored, err := be.Read(context.Background(), storage.StrongConsistency, cur.Id)
	require.NoError(t, err)

	_, err = be.WriteCAS(fencedA, newWidget("y"))
	require.ErrorIs(t, err, ErrFenced, "create after the term ended")
	upd := touch(t, be, stored, "5")
	upd.Metadata["k"] = "6"
	_, err = be.WriteCAS(fencedA, upd)
	require.ErrorIs(t, err, ErrFenced, "update after the term ended")
	upd.Id.Uid = ""
	_, err = be.WriteCAS(fencedA, upd)
	require.ErrorIs(t, err, ErrFenced, "slow-path update after the term ended")
	require.ErrorIs(t, be.DeleteCAS(fencedA, upd.Id, ""), ErrFenced, "delete after the term ended")

	// A fenced write's outcome is known even when its caller has given up
	// (the Manager cancels a controller when its term ends): the write is
	// sent and waited for all the same.
	gaveUp, cancel := context.WithCancel(fencedA)
	cancel()
	_, err = be.WriteCAS(gaveUp, newWidget("z"))
	require.ErrorIs(t, err, ErrFenced, "a fenced write whose caller gave up")

	fk, frev, ok = b.Fence()
	require.True(t, ok)
	require.NoError(t, be.DeleteCAS(WithFence(context.Background(), fk, frev), upd.Id, ""), "delete under the new term")
}
