package server_test

import (
	"testing"

	"github.com/loomrt/loom/internal/testkit/selectortest"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

// TestSelectorConformance runs the label selector suite over the in-memory
// backend; storage/etcd runs it over etcd.
func TestSelectorConformance(t *testing.T) {
	selectortest.Run(t, func(*testing.T) storage.Backend { return inmem.New() })
}
