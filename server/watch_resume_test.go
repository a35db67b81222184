package server

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

func barWatch(since string, bookmarks bool) *pbresource.WatchListRequest {
	return &pbresource.WatchListRequest{
		Type:         foo.BarV1Type,
		Tenancy:      &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		SinceVersion: since,
		Bookmarks:    bookmarks,
	}
}

func writeBar(t *testing.T, client pbresource.ResourceServiceClient, name string) *pbresource.Resource {
	t.Helper()
	rsp, err := client.Write(testCtx(t), &pbresource.WriteRequest{Resource: bar(t, name, "v")})
	require.NoError(t, err)
	return rsp.Resource
}

// TestWatchResume: a stream resumed from the version of the last event it
// saw gets only the later changes, with no snapshot, in process and over
// gRPC.
func TestWatchResume(t *testing.T) {
	for _, overGRPC := range []bool{false, true} {
		t.Run(fmt.Sprintf("grpc=%v", overGRPC), func(t *testing.T) {
			env := newEnv(t)
			client := env.client
			if overGRPC {
				c, stop := serveLoopback(t, env)
				defer stop()
				client = c
			}
			writeBar(t, client, "a")
			first := startWatch(t, client, barWatch("", false))
			require.Equal(t, []string{"a"}, requireSnapshot(t, first, 1))
			b := writeBar(t, client, "b")
			ev := recvEvent(t, first)
			require.Equal(t, b.Version, ev.GetUpsert().GetResource().GetVersion())

			// Changes while no stream is open.
			c := writeBar(t, client, "c")
			_, err := client.Delete(testCtx(t), &pbresource.DeleteRequest{Id: b.Id})
			require.NoError(t, err)

			resumed := startWatch(t, client, barWatch(b.Version, false))
			ev = recvEvent(t, resumed)
			require.Equal(t, c.Version, ev.GetUpsert().GetResource().GetVersion(), "got %v", ev)
			ev = recvEvent(t, resumed)
			require.Equal(t, "b", ev.GetDelete().GetResource().GetId().GetName(), "got %v", ev)
			delVersion := ev.GetDelete().GetVersion()
			require.NotEmpty(t, delVersion)

			// Resuming from the Delete's version sends nothing of the past.
			again := startWatch(t, client, barWatch(delVersion, false))
			d := writeBar(t, client, "d")
			ev = recvEvent(t, again)
			require.Equal(t, d.Version, ev.GetUpsert().GetResource().GetVersion(), "got %v", ev)
		})
	}
}

// TestWatchResumeTooOld: when the log no longer covers since_version, the
// stream says NewSnapshot first, then sends the snapshot and EndOfSnapshot.
func TestWatchResumeTooOld(t *testing.T) {
	env := newEnv(t, withWatchBuffer(4))
	first := writeBar(t, env.client, "a")
	for i := range 10 {
		writeBar(t, env.client, fmt.Sprint("n", i))
	}
	stream := startWatch(t, env.client, barWatch(first.Version, false))
	ev := recvEvent(t, stream)
	require.NotNil(t, ev.GetNewSnapshot(), "want NewSnapshot first, got %v", ev)
	require.Len(t, requireSnapshot(t, stream, 11), 11)
}

// TestWatchResumeNotSupported: a backend that cannot resume is answered
// with NewSnapshot and a full snapshot.
func TestWatchResumeNotSupported(t *testing.T) {
	env := newEnv(t, withBackendWrapper(func(b storage.Backend) storage.Backend {
		return struct{ storage.Backend }{b} // hides WatchListSince
	}))
	a := writeBar(t, env.client, "a")
	stream := startWatch(t, env.client, barWatch(a.Version, true))
	ev := recvEvent(t, stream)
	require.NotNil(t, ev.GetNewSnapshot(), "want NewSnapshot first, got %v", ev)
	require.Equal(t, []string{"a"}, requireSnapshot(t, stream, 1))
}

// TestWatchResumeBadVersion: a since_version that is not a number, or is
// ahead of the store, fails the stream with nothing sent.
func TestWatchResumeBadVersion(t *testing.T) {
	env := newEnv(t)
	a := writeBar(t, env.client, "a")
	v, err := strconv.ParseUint(a.Version, 10, 64)
	require.NoError(t, err)
	ahead := strconv.FormatUint(v+1000, 10)
	for _, tc := range []struct {
		since string
		code  codes.Code
	}{
		{"abc", codes.InvalidArgument},
		{"-1", codes.InvalidArgument},
		{"1.5", codes.InvalidArgument},
		{ahead, codes.OutOfRange},
	} {
		stream := startWatch(t, env.client, barWatch(tc.since, false))
		ev, err := stream.Recv()
		require.Nil(t, ev, "since %q: nothing is sent", tc.since)
		require.Equal(t, tc.code, status.Code(err), "since %q: %v", tc.since, err)
		require.Contains(t, err.Error(), "since_version")
	}
}

// TestWatchBookmarks: an idle stream that asked for bookmarks gets them,
// with the store's current version, also when other types change; resuming
// from a bookmark misses nothing. A stream that did not ask gets none.
func TestWatchBookmarks(t *testing.T) {
	env := newEnv(t, withBookmarkInterval(20*time.Millisecond))
	client, stop := serveLoopback(t, env)
	defer stop()
	writeBar(t, client, "a")
	stream := startWatch(t, client, barWatch("", true))
	requireSnapshot(t, stream, 1)
	plain := startWatch(t, client, barWatch("", false))
	requireSnapshot(t, plain, 1)

	// Another type changes: the bar stream sees nothing of it but its
	// bookmark moves on.
	rsp, err := client.Write(testCtx(t), &pbresource.WriteRequest{Resource: zip(t, "z")})
	require.NoError(t, err)
	other := rsp.Resource.Version

	deadline := time.Now().Add(10 * time.Second)
	for {
		ev := recvEvent(t, stream)
		bm := ev.GetBookmark()
		require.NotNil(t, bm, "an idle stream gets only bookmarks, got %v", ev)
		if bm.Version == other {
			break
		}
		require.True(t, time.Now().Before(deadline), "no bookmark at version %s", other)
	}
	c := writeBar(t, client, "c")
	resumed := startWatch(t, client, barWatch(other, false))
	ev := recvEvent(t, resumed)
	require.Equal(t, c.Version, ev.GetUpsert().GetResource().GetVersion(), "got %v", ev)

	// The stream that did not ask sees c and nothing else.
	ev = recvEvent(t, plain)
	require.Equal(t, c.Version, ev.GetUpsert().GetResource().GetVersion(), "got %v", ev)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	quiet, err := client.WatchList(ctx, barWatch("", false))
	require.NoError(t, err)
	requireSnapshot(t, quiet, 2)
	_, err = quiet.Recv()
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "no bookmark without asking")
}

// TestResumeAfterRestart: a since_version and a page token of a server
// over an in-memory store that has since been replaced (the process
// restarted, the store is new and empty but for what was written since)
// are not served from the new store's history: the watch starts over
// with NewSnapshot and the new snapshot, the next page is Aborted.
func TestResumeAfterRestart(t *testing.T) {
	before := newEnv(t)
	for _, name := range []string{"a", "b", "c"} {
		writeBar(t, before.client, name)
	}
	last := writeBar(t, before.client, "d")
	page, err := before.client.List(testCtx(t), &pbresource.ListRequest{
		Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, PageSize: 2})
	require.NoError(t, err)
	require.NotEmpty(t, page.NextPageToken)

	// The restart: a new store, written to as often as the old one was,
	// and more.
	after := newEnv(t)
	for _, name := range []string{"x", "y", "z", "w", "v"} {
		writeBar(t, after.client, name)
	}

	w := startWatch(t, after.client, barWatch(last.Version, false))
	ev := recvEvent(t, w)
	require.NotNil(t, ev.GetNewSnapshot(), "a resume point of the old store: got %v", ev)
	require.ElementsMatch(t, []string{"v", "w", "x", "y", "z"}, requireSnapshot(t, w, 5))

	_, err = after.client.List(testCtx(t), &pbresource.ListRequest{
		Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		PageSize: 2, PageToken: page.NextPageToken})
	require.Equal(t, codes.Aborted, status.Code(err), "a page token of the old store: got %v", err)
}
