package etcd

import (
	"testing"

	"github.com/loomrt/loom/internal/testkit/aclmatrix"
)

// TestACLMatrix runs the ACL matrix (every RPC × token shape × stored vs
// requested GroupVersion × owner visibility) over etcd.
func TestACLMatrix(t *testing.T) {
	aclmatrix.Run(t, newTestBackend(t))
}
