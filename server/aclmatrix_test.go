package server_test

import (
	"testing"

	"github.com/loomrt/loom/internal/testkit/aclmatrix"
	"github.com/loomrt/loom/storage/inmem"
)

// TestACLMatrix runs the ACL matrix (every RPC × token shape × stored vs
// requested GroupVersion × owner visibility) over the in-memory backend;
// storage/etcd runs it over etcd.
func TestACLMatrix(t *testing.T) {
	aclmatrix.Run(t, inmem.New())
}
