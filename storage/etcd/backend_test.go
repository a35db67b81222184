package etcd

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/conformance"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

func TestConformance(t *testing.T) {
	conformance.TestWithOptions(t, func(t *testing.T) storage.Backend {
		if strings.Contains(t.Name(), "/Resume/") || strings.HasSuffix(t.Name(), "Pages/TooOld") {
			// The resume tests, Pages/TooOld and OwnedPages/TooOld read
			// the store's version (an etcd revision, which every test on
			// a shared etcd moves) and compact its history: they get an
			// etcd of their own.
			return isolatedBackend(t, WithWatchLogEvents(2000))
		}
		if strings.HasSuffix(t.Name(), "/SlowWatcher") {
			// Writes to the embedded etcd take milliseconds under -race:
			// a small ring (rounded up to 256) lets the test overflow it with
			// few writes.
			return newTestBackend(t, WithWatchLogEvents(200))
		}
		// Large enough for the racing-writer tests, which let a few
		// hundred events wait for their consumer.
		return newTestBackend(t, WithWatchLogEvents(2000))
	}, conformance.Options{
		SlowWatcherWrites: 500,
		NewHistorian: func(t *testing.T, limits storage.HistoryLimits) storage.Backend {
			b := newTestBackend(t, WithHistory(limits))
			stop, err := b.Start(testContext(t))
			require.NoError(t, err)
			t.Cleanup(stop)
			return b
		},
		Forget: func(t *testing.T, b storage.Backend) {
			client := b.(*Backend).client
			ctx := testContext(t)
			resp, err := client.Get(ctx, "compact-here")
			require.NoError(t, err)
			_, err = client.Compact(ctx, resp.Header.Revision)
			require.NoError(t, err)
		},
	})
}

// isolatedBackend returns a backend on an embedded etcd of its own.
func isolatedBackend(t *testing.T, opts ...Option) *Backend {
	t.Helper()
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{etcdtest.Start(t)},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { client.Close() })
	return New(client, opts...)
}
