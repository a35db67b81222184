package etcd

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

var (
	widgetType = &pbresource.Type{Group: "test", GroupVersion: "v1", Kind: "Widget"}
	widget     = storage.UnversionedTypeFrom(widgetType)
	anyTenancy = &pbresource.Tenancy{Partition: storage.Wildcard, Namespace: storage.Wildcard}
)

func newWidget(name string) *pbresource.Resource {
	return &pbresource.Resource{
		Id: &pbresource.ID{
			Uid:     ulid.Make().String(),
			Name:    name,
			Type:    widgetType,
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		},
		Generation: ulid.Make().String(),
		Metadata:   map[string]string{"k": "v"},
	}
}

func mustWrite(t *testing.T, b *Backend, res *pbresource.Resource) *pbresource.Resource {
	t.Helper()
	out, err := b.WriteCAS(context.Background(), res)
	require.NoError(t, err)
	return out
}

// touch writes a changed copy of res.
func touch(t *testing.T, b *Backend, res *pbresource.Resource, value string) *pbresource.Resource {
	t.Helper()
	c := proto.Clone(res).(*pbresource.Resource)
	c.Metadata["k"] = value
	return mustWrite(t, b, c)
}

func nextEvent(t *testing.T, ctx context.Context, w storage.Watch) *pbresource.WatchEvent {
	t.Helper()
	ev, err := w.Next(ctx)
	require.NoError(t, err)
	return ev
}

// compactAll compacts the test etcd's history up to its current revision.
func compactAll(t *testing.T) int64 {
	t.Helper()
	ctx := testContext(t)
	resp, err := testClient.Get(ctx, "/compaction-probe")
	require.NoError(t, err)
	rev := resp.Header.Revision
	_, err = testClient.Compact(ctx, rev, clientv3.WithCompactPhysical())
	require.NoError(t, err)
	return rev
}

// requireCompactedError checks that the watch ends with an error that
// says it was compacted, recognisable by both this package's and etcd's
// sentinel.
func requireCompactedError(t *testing.T, ctx context.Context, w storage.Watch) {
	t.Helper()
	_, err := w.Next(ctx)
	require.Error(t, err)
	require.ErrorIs(t, err, ErrCompacted)
	require.ErrorIs(t, err, rpctypes.ErrCompacted)
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, ErrCompacted, "a watch that ended stays ended")
}

// TestWatchCompactedBeforeStart compacts the revisions a WatchList needs
// between its snapshot and the start of its etcd watch.
func TestWatchCompactedBeforeStart(t *testing.T) {
	b := newTestBackend(t)
	ctx := testContext(t)
	a := mustWrite(t, b, newWidget("a"))

	b.beforeWatch = func(int64) {
		touch(t, b, a, "1")
		mustWrite(t, b, newWidget("b"))
		compactAll(t)
	}
	w, err := b.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	defer w.Close()

	ev := nextEvent(t, ctx, w)
	require.Equal(t, a.Version, ev.GetUpsert().GetResource().GetVersion())
	require.NotNil(t, nextEvent(t, ctx, w).GetEndOfSnapshot())
	requireCompactedError(t, ctx, w)
}

// TestWatchCompactedWhileDisconnected cuts a live watch off from etcd,
// writes and compacts meanwhile, and reconnects: the etcd client resumes
// the watch at a revision that is gone, and the watch must end with
// ErrCompacted rather than skip what it missed.
func TestWatchCompactedWhileDisconnected(t *testing.T) {
	p := newProxy(t)
	prefix := newPrefix()
	watched := New(p.client(t), WithPrefix(prefix))
	direct := New(testClient, WithPrefix(prefix))
	ctx := testContext(t)

	w, err := watched.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	require.NotNil(t, nextEvent(t, ctx, w).GetEndOfSnapshot())
	a := mustWrite(t, direct, newWidget("a"))
	require.Equal(t, a.Version, nextEvent(t, ctx, w).GetUpsert().GetResource().GetVersion())

	p.setCut(true)
	a = touch(t, direct, a, "1")
	touch(t, direct, a, "2")
	compactAll(t)
	p.setCut(false)

	requireCompactedError(t, ctx, w)
}

// TestWatchResumesAfterDisconnect cuts a live watch off from etcd, writes
// meanwhile, and reconnects: the watch delivers exactly the writes it
// missed, in order, and goes on.
func TestWatchResumesAfterDisconnect(t *testing.T) {
	p := newProxy(t)
	prefix := newPrefix()
	watched := New(p.client(t), WithPrefix(prefix))
	direct := New(testClient, WithPrefix(prefix))
	ctx := testContext(t)

	w, err := watched.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	require.NotNil(t, nextEvent(t, ctx, w).GetEndOfSnapshot())
	a := mustWrite(t, direct, newWidget("a"))
	require.Equal(t, a.Version, nextEvent(t, ctx, w).GetUpsert().GetResource().GetVersion())

	p.setCut(true)
	var want []string
	for i := range 5 {
		a = touch(t, direct, a, fmt.Sprint(i))
		want = append(want, "U "+a.Version)
	}
	require.NoError(t, direct.DeleteCAS(ctx, a.Id, a.Version))
	want = append(want, "D "+a.Version)
	// Give the client time to notice the cut before the link comes back.
	time.Sleep(200 * time.Millisecond)
	p.setCut(false)
	c := mustWrite(t, direct, newWidget("c"))
	want = append(want, "U "+c.Version)

	var got []string
	for range want {
		ev := nextEvent(t, ctx, w)
		switch {
		case ev.GetUpsert() != nil:
			got = append(got, "U "+ev.GetUpsert().Resource.Version)
		case ev.GetDelete() != nil:
			got = append(got, "D "+ev.GetDelete().Resource.Version)
		default:
			got = append(got, fmt.Sprint(ev))
		}
	}
	require.Equal(t, want, got)
}

// TestWatchEndsWhenClientCloses checks that closing the etcd client ends a
// watch with an error instead of leaving Next blocked.
func TestWatchEndsWhenClientCloses(t *testing.T) {
	c, err := newTestClient()
	require.NoError(t, err)
	b := New(c, WithPrefix(newPrefix()))
	ctx := testContext(t)
	w, err := b.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	defer w.Close()
	require.NotNil(t, nextEvent(t, ctx, w).GetEndOfSnapshot())
	require.NoError(t, c.Close())
	_, err = w.Next(ctx)
	require.Error(t, err)
	require.False(t, errors.Is(err, context.DeadlineExceeded), "Next must not wait for its deadline: %v", err)
}

// TestWatchCloseWhileCutOff closes a watch whose etcd connection is down:
// Close must not wait for the client to reconnect.
func TestWatchCloseWhileCutOff(t *testing.T) {
	p := newProxy(t)
	b := New(p.client(t), WithPrefix(newPrefix()))
	ctx := testContext(t)
	w, err := b.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	require.NotNil(t, nextEvent(t, ctx, w).GetEndOfSnapshot())

	p.setCut(true)
	time.Sleep(200 * time.Millisecond) // let the client notice
	closed := make(chan struct{})
	go func() {
		w.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for etcd to come back")
	}
	_, err = w.Next(ctx)
	require.ErrorIs(t, err, storage.ErrWatchClosed)
}
