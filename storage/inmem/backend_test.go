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
		// Enough to overflow the default watch buffer.
		SlowWatcherWrites: inmem.DefaultWatchBufferSize + 2000,
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
