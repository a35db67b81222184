package robustness

import (
	"context"
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
)

// The flags of a test binary that imports the package; each also reads an
// environment variable, which takes effect when the flag is not given.
var (
	seedFlag  = flag.Uint64("robustness.seed", 0, "seed of the robustness run (LOOM_ROBUSTNESS_SEED); 0: a random one, printed")
	seedsFlag = flag.Int("robustness.seeds", 0, "how many seeds to run, from -robustness.seed on (LOOM_ROBUSTNESS_SEEDS; default 1)")
	longFlag  = flag.Bool("robustness.long", false, "run the long workload: more clients, names, operations (LOOM_ROBUSTNESS_LONG=1)")
)

// Seeds returns the seeds a test runs: -robustness.seed (or
// LOOM_ROBUSTNESS_SEED, else a random one) and, with -robustness.seeds=N,
// the N-1 following it.
func Seeds() []uint64 {
	seed := *seedFlag
	if seed == 0 {
		seed, _ = strconv.ParseUint(os.Getenv("LOOM_ROBUSTNESS_SEED"), 10, 64)
	}
	if seed == 0 {
		seed = rand.Uint64N(1 << 32)
	}
	n := *seedsFlag
	if n == 0 {
		n, _ = strconv.Atoi(os.Getenv("LOOM_ROBUSTNESS_SEEDS"))
	}
	out := []uint64{seed}
	for i := 1; i < n; i++ {
		out = append(out, seed+uint64(i))
	}
	return out
}

// Long reports whether the long workload was asked for.
func Long() bool {
	return *longFlag || os.Getenv("LOOM_ROBUSTNESS_LONG") == "1"
}

// ShortConfig is the run `make test` makes: a few seconds under -race.
func ShortConfig(seed uint64) Config {
	return Config{Seed: seed, Clients: 4, Ops: 300, Names: 3, Watchers: 3, SlowWatcher: true, Finalizers: true}
}

// LongConfig is the run `make robustness` makes.
func LongConfig(seed uint64) Config {
	return Config{Seed: seed, Clients: 8, Ops: 1000, Names: 5, Watchers: 3, SlowWatcher: true, Finalizers: true}
}

// ConfigFor returns LongConfig with -robustness.long, else ShortConfig.
func ConfigFor(seed uint64) Config {
	if Long() {
		return LongConfig(seed)
	}
	return ShortConfig(seed)
}

// RunChecked runs cfg against client and checks the history; it returns
// the problems found, each naming nothing of the seed (the caller does).
func RunChecked(t testing.TB, client pbresource.ResourceServiceClient, cfg Config) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	h, err := Run(ctx, client, cfg)
	ran := time.Since(start)
	if err != nil {
		return []string{"the run did not finish: " + err.Error()}
	}
	settled, slow := 0, 0
	for _, w := range h.Watches {
		if w.Settled {
			settled++
		}
		if strings.Contains(w.End, "keep up") {
			slow++
		}
	}
	problems := h.Check(time.Minute)
	t.Logf("seed %d: %d operations, %d watches (%d settled at the end, %d ended for falling behind); ran %v, checked in %v",
		cfg.Seed, len(h.Ops), len(h.Watches), settled, slow, ran.Round(time.Millisecond), (time.Since(start) - ran).Round(time.Millisecond))
	return problems
}

// Verify runs cfg against client, checks the history, and fails t with
// every problem found and the flag that reproduces the run.
func Verify(t testing.TB, client pbresource.ResourceServiceClient, cfg Config) {
	t.Helper()
	if problems := RunChecked(t, client, cfg); len(problems) > 0 {
		t.Fatalf("robustness check failed with seed %d (rerun with -robustness.seed=%d):\n%s",
			cfg.Seed, cfg.Seed, strings.Join(problems, "\n"))
	}
}
