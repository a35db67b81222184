package resourcetest

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// T is the part of *testing.T the kit uses. *testing.T, *testing.B and
// testing.TB satisfy it; so can a test's own fake, to check what a helper
// reports. FailNow must not return (testing.T ends the goroutine with
// runtime.Goexit).
type T interface {
	Helper()
	Errorf(format string, args ...any)
	FailNow()
	Cleanup(func())
}

// logger is implemented by a T that can log (testing.T can).
type logger interface {
	Logf(format string, args ...any)
}

// fatalf reports a failure on t and stops the test.
func fatalf(t T, format string, args ...any) {
	t.Helper()
	t.Errorf(format, args...)
	t.FailNow()
}

// attemptT is the T handed to a check while it is retried: it collects
// what the check reports instead of failing the test, so that only the
// last attempt's complaints are shown when the wait gives up.
type attemptT struct {
	mu       sync.Mutex
	errors   []string
	failed   bool
	cleanups []func()
}

var _ T = (*attemptT)(nil)

func (a *attemptT) Helper() {}

func (a *attemptT) Errorf(format string, args ...any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.errors = append(a.errors, strings.TrimSpace(fmt.Sprintf(format, args...)))
	a.failed = true
}

func (a *attemptT) FailNow() {
	a.mu.Lock()
	a.failed = true
	a.mu.Unlock()
	runtime.Goexit()
}

func (a *attemptT) Cleanup(f func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.cleanups = append(a.cleanups, f)
}

func (a *attemptT) Logf(string, ...any) {}

// runAttempt calls check with a fresh attemptT in its own goroutine (so FailNow
// can end it) and returns that attemptT once check and its cleanups are done.
func runAttempt(check func(T)) *attemptT {
	a := &attemptT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			for i := len(a.cleanups) - 1; i >= 0; i-- {
				a.cleanups[i]()
			}
		}()
		check(a)
	}()
	<-done
	return a
}

// report returns what the attempt complained about, one problem per line.
func (a *attemptT) report() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.errors) == 0 {
		return "the check failed without saying why"
	}
	return strings.Join(a.errors, "\n")
}

func (a *attemptT) hasFailed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failed
}

// jsonOptions render resources for failure messages; Resolver also finds
// Loom's own types (a tombstone's data).
var jsonOptions = protojson.MarshalOptions{Multiline: true, Indent: "  ", Resolver: pbresource.Resolver}

// prettyResource renders res as indented JSON. Data whose message type is
// not linked into the test binary cannot be rendered as JSON, so it is then
// summarised by its type URL and size.
func prettyResource(res *pbresource.Resource) string {
	if res == nil {
		return "<none>"
	}
	if b, err := jsonOptions.Marshal(res); err == nil {
		return string(b)
	}
	bare := resource.Clone(res)
	data := bare.Data
	bare.Data = nil
	b, err := jsonOptions.Marshal(bare)
	if err != nil {
		return fmt.Sprintf("%v", res)
	}
	return fmt.Sprintf("%s\n(data: %s, %d bytes, not rendered: the message type is not linked into this binary)",
		b, data.GetTypeUrl(), len(data.GetValue()))
}

// prettyMessage renders any message as indented JSON, for the "expected"
// part of failure messages.
func prettyMessage(m proto.Message) string {
	if m == nil {
		return "<nil>"
	}
	b, err := jsonOptions.Marshal(m)
	if err != nil {
		return fmt.Sprintf("%v", m)
	}
	return strings.TrimSpace(string(b))
}

// indent prefixes every line of s with two spaces.
func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ")
}
