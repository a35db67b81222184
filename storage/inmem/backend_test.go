package inmem_test

import (
	"testing"

	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/conformance"
	"github.com/loomrt/loom/storage/inmem"
)

func TestBackend(t *testing.T) {
	conformance.TestWithOptions(t, func(t *testing.T) storage.Backend {
		return inmem.New()
	}, conformance.Options{
		// Overflowing the default buffer takes over 130,000 writes, which
		// is slow under -race; TestBackendSmallWatchBuffer checks the same
		// behaviour with a small buffer.
		SkipSlowWatcher: true,
		NewHistorian: func(t *testing.T, limits storage.HistoryLimits) storage.Backend {
			return inmem.New(inmem.WithHistory(limits))
		},
	})
}

// TestBackendSmallWatchBuffer runs the suite with a watch buffer far smaller
// than the default, to check that nothing but the slow watcher depends on
// the buffer being large.
func TestBackendSmallWatchBuffer(t *testing.T) {
	conformance.TestWithOptions(t, func(t *testing.T) storage.Backend {
		return inmem.New(inmem.WithWatchBufferSize(1024))
	}, conformance.Options{SlowWatcherWrites: 3000})
}
