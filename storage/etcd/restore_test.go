package etcd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"

	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// member is an etcd of its own for a test, on data directory dir.
type member struct {
	dir    string
	peer   string
	client *clientv3.Client
	stop   func()
}

// startMember starts a single etcd member on dir (new or restored) until
// stop or the end of the test.
func startMember(t *testing.T, dir string, peer, client string) *member {
	t.Helper()
	clientURL, err := etcdtest.FreeURL()
	require.NoError(t, err)
	if client != "" {
		clientURL.Host = client
	}
	peerURL, err := etcdtest.FreeURL()
	require.NoError(t, err)
	if peer != "" {
		peerURL.Host = peer
	}
	e, err := etcdtest.StartMember(etcdtest.Member{Name: "m", Dir: dir, ClientURL: clientURL, PeerURL: peerURL,
		InitialCluster: "m=" + peerURL.String()})
	require.NoError(t, err)
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(30 * time.Second):
		e.Close()
		t.Fatal("etcd did not become ready within 30s")
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{clientURL.Host}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	m := &member{dir: dir, peer: peerURL.String(), client: c}
	var stopped bool
	m.stop = func() {
		if !stopped {
			stopped = true
			c.Close()
			e.Close()
		}
	}
	t.Cleanup(m.stop)
	return m
}

// saveSnapshot writes an etcd snapshot of m (etcdctl snapshot save) to a
// file and returns its path.
func saveSnapshot(t *testing.T, ctx context.Context, m *member) string {
	t.Helper()
	rc, err := m.client.Snapshot(ctx)
	require.NoError(t, err)
	defer rc.Close()
	path := filepath.Join(t.TempDir(), "snapshot.db")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = io.Copy(f, rc)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return path
}

// restore restores the snapshot into a new data directory (etcdutl
// snapshot restore, bumping the revision by bump and marking it compacted
// when bump > 0) and starts a member on it.
func restore(t *testing.T, snap string, bump uint64) *member {
	t.Helper()
	peer, err := etcdtest.FreeURL()
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "restored")
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: snap, Name: "m", OutputDataDir: dir,
		PeerURLs: []string{peer.String()}, InitialCluster: "m=" + peer.String(),
		InitialClusterToken: "etcd-cluster",
		RevisionBump:        bump, MarkCompacted: bump > 0,
	})
	require.NoError(t, err)
	return startMember(t, dir, peer.Host, "")
}

// TestRestoreNeverReusesVersions takes an etcd snapshot in the middle of
// a load, goes on writing and watching, and restores the snapshot into a
// fresh etcd: with a revision bump and compaction mark the store is served,
// no version is handed out twice and a watch resumed from before the
// restore gets a new snapshot; without them, Loom refuses to start.
func TestRestoreNeverReusesVersions(t *testing.T) {
	ctx := testContext(t)
	src := startMember(t, filepath.Join(t.TempDir(), "src"), "", "")
	b := New(src.client, WithMarkInterval(20*time.Millisecond))
	stop, err := b.Start(ctx)
	require.NoError(t, err)

	for i := range 20 {
		mustWrite(t, b, newWidget(fmt.Sprintf("before-%d", i)))
	}
	w, err := b.WatchList(ctx, widget, anyTenancy, "")
	require.NoError(t, err)
	for nextEvent(t, ctx, w).GetEndOfSnapshot() == nil {
	}
	snap := saveSnapshot(t, ctx, src)
	// Acknowledged after the snapshot: lost by the restore, their
	// versions handed out to the watch.
	var last int64
	for i := range 20 {
		res := mustWrite(t, b, newWidget(fmt.Sprintf("after-%d", i)))
		last, _ = strconv.ParseInt(res.Version, 10, 64)
	}
	resume := ""
	for resume != strconv.FormatInt(last, 10) {
		resume = nextEvent(t, ctx, w).GetUpsert().GetResource().GetVersion()
	}
	w.Close()
	// The mark is recorded on stop, and before that when etcd moved.
	stop()
	src.stop()

	t.Run("Bumped", func(t *testing.T) {
		m := restore(t, snap, 1000)
		b2 := New(m.client)
		stop, err := b2.Start(ctx)
		require.NoError(t, err, "a restore with a revision bump and compaction mark is served")
		defer stop()

		w, err := b2.WatchListSince(ctx, widget, anyTenancy, "", storage.WatchOptions{SinceVersion: resume})
		require.NoError(t, err)
		defer w.Close()
		require.NotNil(t, nextEvent(t, ctx, w).GetNewSnapshot(), "a resume point from before the restore gets a new snapshot")
		names := map[string]bool{}
		for {
			ev := nextEvent(t, ctx, w)
			if ev.GetEndOfSnapshot() != nil {
				break
			}
			names[ev.GetUpsert().GetResource().GetId().GetName()] = true
		}
		require.Len(t, names, 20, "the snapshot is the restored state")
		require.False(t, names["after-0"], "writes after the snapshot are lost by the restore")

		res := mustWrite(t, b2, newWidget("new"))
		v, _ := strconv.ParseInt(res.Version, 10, 64)
		require.Greater(t, v, last, "a version handed out before the restore is never handed out again")
		ev := nextEvent(t, ctx, w)
		require.Equal(t, res.Version, ev.GetUpsert().GetResource().GetVersion())
	})

	t.Run("NotBumped", func(t *testing.T) {
		m := restore(t, snap, 0)
		_, err := New(m.client).Start(ctx)
		require.ErrorIs(t, err, ErrStoreRewound)
		require.ErrorContains(t, err, "--bump-revision")
	})

	t.Run("NotBumpedUnderARunningServer", func(t *testing.T) {
		// A server that ran across the restore has seen versions the
		// restored store gives out again: its next mark records them, and
		// every server refuses the store at its next start.
		m := restore(t, snap, 0)
		survivor := New(m.client)
		survivor.observe(last)
		survivor.mark(ctx)
		cur, err := m.client.Get(ctx, "probe")
		require.NoError(t, err)
		_, err = New(m.client).Start(ctx)
		require.ErrorIs(t, err, ErrStoreRewound)
		require.ErrorContains(t, err, fmt.Sprintf("etcd is at revision %d, below revision %d", cur.Header.Revision, last))
	})
}

// TestStoreLayout checks that the layout version is written at first start
// and that a newer layout is refused.
func TestStoreLayout(t *testing.T) {
	ctx := testContext(t)
	b := newTestBackend(t)
	stop, err := b.Start(ctx)
	require.NoError(t, err)
	stop()
	key := b.keys.prefix + layoutKeySuffix
	resp, err := testClient.Get(ctx, key)
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, strconv.Itoa(LayoutVersion), string(resp.Kvs[0].Value))

	stop, err = New(testClient, WithPrefix(b.keys.prefix)).Start(ctx)
	require.NoError(t, err, "the same layout starts again")
	stop()

	_, err = testClient.Put(ctx, key, strconv.Itoa(LayoutVersion+1))
	require.NoError(t, err)
	_, err = New(testClient, WithPrefix(b.keys.prefix)).Start(ctx)
	require.ErrorIs(t, err, ErrLayoutTooNew)
	require.ErrorContains(t, err, fmt.Sprintf("the store has layout %d, this server knows layouts up to %d", LayoutVersion+1, LayoutVersion))
}
