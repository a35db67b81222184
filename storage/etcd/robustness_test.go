package etcd

import (
	"fmt"
	"testing"

	"github.com/loomrt/loom/internal/testkit/robustness"
)

// TestRobustness runs the seeded history of internal/testkit/robustness (its flags
// pick the seed and the length) against the service over the embedded
// etcd: linearizable writes and strong reads, monotonic eventual reads,
// and every watch validated, with streams broken off at random and a slow
// watcher.
func TestRobustness(t *testing.T) {
	for _, seed := range robustness.Seeds() {
		// A small watch log, so that the slow watcher is sometimes
		// ended for falling behind.
		t.Run(fmt.Sprintf("in-process/%d", seed), func(t *testing.T) {
			be := newTestBackend(t, WithWatchLogEvents(32))
			robustness.Verify(t, robustness.NewService(t, be), robustness.ConfigFor(seed))
		})
		t.Run(fmt.Sprintf("grpc/%d", seed), func(t *testing.T) {
			be := newTestBackend(t, WithWatchLogEvents(32))
			robustness.Verify(t, robustness.NewGRPCService(t, be), robustness.ConfigFor(seed))
		})
	}
}
