package etcd

import (
	"strings"
	"testing"

	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/conformance"
)

func TestConformance(t *testing.T) {
	conformance.TestWithOptions(t, func(t *testing.T) storage.Backend {
		if strings.HasSuffix(t.Name(), "/SlowWatcher") {
			// Writes to the embedded etcd take milliseconds under -race:
			// a small buffer lets the test overflow it with few writes.
			return newTestBackend(t, WithWatchBufferSize(200))
		}
		// Large enough for the racing-writer tests, which let a few
		// hundred events wait for their consumer.
		return newTestBackend(t, WithWatchBufferSize(2000))
	}, conformance.Options{
		SlowWatcherWrites: 500,
	})
}
