package etcd

import (
	"testing"

	"github.com/loomrt/loom/internal/testkit/selectortest"
	"github.com/loomrt/loom/storage"
)

// TestSelectorConformance runs the label selector suite (List, ListByOwner
// and WatchList with a selector, under racing writers and resumes) over
// etcd.
func TestSelectorConformance(t *testing.T) {
	selectortest.Run(t, func(t *testing.T) storage.Backend { return newTestBackend(t) })
}
