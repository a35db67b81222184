package daemon

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/loomrt/loom/internal/testkit/testlog"
)

// TestWatchToken: a changed token file replaces the token; an empty or
// missing one leaves it in force, logged once per error.
func TestWatchToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first\n")
	log := &testlog.Buffer{}
	token, err := WatchToken(t.Context(), "http-token-file", path, time.Millisecond, hclog.New(&hclog.LoggerOptions{Output: log}))
	if err != nil {
		t.Fatal(err)
	}
	if got := token(); got != "first" {
		t.Fatalf("token = %q, want first", got)
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s; log:\n%s", what, log)
			}
			time.Sleep(time.Millisecond) // polling a condition, with a deadline
		}
	}
	write("second")
	waitUntil("the changed token in force", func() bool { return token() == "second" })
	if !strings.Contains(log.String(), "token file reloaded") || strings.Contains(log.String(), "second") {
		t.Errorf("the reload is not logged, or the token is:\n%s", log)
	}

	write("  \n")
	waitUntil("an empty file logged", func() bool { return strings.Contains(log.String(), "is empty") })
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitUntil("a missing file logged", func() bool { return strings.Contains(log.String(), "no such file") })
	if got := token(); got != "second" {
		t.Errorf("after an empty, then missing file: token = %q, want the previous one", got)
	}
	if n := strings.Count(log.String(), "is empty"); n != 1 {
		t.Errorf("an empty file logged %d times, want once:\n%s", n, log)
	}
}
