package host

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"

	"github.com/loomrt/loom/internal/testkit/testlog"
)

// AuditLines is auditLines, for the tests of package host_test.
var AuditLines = auditLines

// auditLines returns the audit lines of log and the refusals they count
// in all (a "request denied" line counts one).
func auditLines(t *testing.T, log string) (lines, refusals int) {
	t.Helper()
	count := regexp.MustCompile(`more requests denied: count=(\d+) `)
	for _, line := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(line, "request denied:"):
			lines++
			refusals++
		case strings.Contains(line, "more requests denied:"):
			m := count.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("an aggregated line without a count: %q", line)
			}
			n, _ := strconv.Atoi(m[1])
			lines++
			refusals += n
		}
	}
	return lines, refusals
}

// TestAuditLogBounded: a flood of refusals, from a few tokens and from
// thousands of invented ones, has a bounded number of lines per window,
// and the lines count every refusal exactly.
func TestAuditLogBounded(t *testing.T) {
	buf := &testlog.Buffer{}
	const maxKeys = 8
	l := newAuditLog(hclog.New(&hclog.LoggerOptions{Output: buf}), time.Hour, maxKeys) // flushed by hand
	total := 0
	refuse := func(token string, code codes.Code, n int) {
		for range n {
			l.refused(auditKey{token: token, method: "/m/Write", code: code}, "10.0.0.1:1234")
		}
		total += n
	}
	for window := range 3 {
		refuse("(unknown)", codes.Unauthenticated, 100_000)
		refuse("reader", codes.PermissionDenied, 5_000)
		refuse("reader", codes.PermissionDenied, 1)
		for i := range 1000 {
			refuse(fmt.Sprintf("invented-%d-%d", window, i), codes.PermissionDenied, 3)
		}
		l.flush()
	}
	l.Close()

	lines, refusals := auditLines(t, buf.String())
	if refusals != total {
		t.Errorf("the lines count %d refusals, want %d", refusals, total)
	}
	// Per window at most: a line at once and an aggregated one per key
	// told apart, and per code for the others.
	if limit := 3 * 2 * (maxKeys + 2); lines > limit {
		t.Errorf("%d lines for 3 windows, want at most %d", lines, limit)
	}
	if !strings.Contains(buf.String(), `token="(others)"`) {
		t.Errorf("the keys beyond %d are not counted together under (others):\n%s", maxKeys, buf)
	}
}

// TestAuditLogWindow: the aggregated line comes by itself once the window
// has passed, and a key refused nothing for a window is forgotten, so its
// next refusal has a line at once.
func TestAuditLogWindow(t *testing.T) {
	buf := &testlog.Buffer{}
	l := newAuditLog(hclog.New(&hclog.LoggerOptions{Output: buf}), 20*time.Millisecond, 8)
	defer l.Close()
	key := auditKey{token: "reader", method: "/m/Read", code: codes.PermissionDenied}
	for range 5 {
		l.refused(key, "peer")
	}
	waitLog := func(what string, ok func(string) bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok(buf.String()) {
			if time.Now().After(deadline) {
				t.Fatalf("%s within 5s; log:\n%s", what, buf)
			}
			time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
		}
	}
	waitLog("no aggregated line", func(s string) bool { return strings.Contains(s, "more requests denied: count=4 ") })
	waitLog("the quiet key is not forgotten", func(string) bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.entries) == 0 && l.timer == nil
	})
	l.refused(key, "peer")
	if lines, _ := auditLines(t, buf.String()); lines != 3 {
		t.Errorf("%d lines, want 3 (at once, aggregated, at once again):\n%s", lines, buf)
	}
}
