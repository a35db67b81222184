package resourcetest_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
)

// fakeT records what the kit reports instead of failing the test, so the
// kit's failure messages can be checked.
type fakeT struct {
	mu       sync.Mutex
	errors   []string
	failed   bool
	stopped  bool // FailNow was called
	cleanups []func()
}

var _ resourcetest.T = (*fakeT)(nil)

func (f *fakeT) Helper()             {}
func (f *fakeT) Logf(string, ...any) {}

func (f *fakeT) Errorf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
	f.failed = true
}

func (f *fakeT) FailNow() {
	f.mu.Lock()
	f.failed, f.stopped = true, true
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeT) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

// output returns everything reported, one report after another.
func (f *fakeT) output() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.errors, "\n---\n")
}

// runFake runs fn with a fakeT in its own goroutine (FailNow ends it, as it
// ends a test), then runs the fakeT's cleanups, and returns it.
func runFake(fn func(t *fakeT)) *fakeT {
	f := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	done = make(chan struct{})
	go func() {
		defer close(done)
		for i := len(f.cleanups) - 1; i >= 0; i-- {
			f.cleanups[i]()
		}
	}()
	<-done
	return f
}

// requireFailed checks that f failed (and stopped with FailNow, when
// stopped is true) with a report containing every one of wants.
func requireFailed(t *testing.T, f *fakeT, stopped bool, wants ...string) string {
	t.Helper()
	out := f.output()
	require.True(t, f.failed, "the kit did not report a failure")
	if stopped {
		require.True(t, f.stopped, "the kit did not stop the test (FailNow); it reported:\n%s", out)
	}
	for _, w := range wants {
		require.Contains(t, out, w)
	}
	return out
}

// requirePassed checks that f saw no failure.
func requirePassed(t *testing.T, f *fakeT) {
	t.Helper()
	require.False(t, f.failed, "the kit reported a failure:\n%s", f.output())
}

// startService runs a service with the example types.
func startService(t *testing.T, opts ...resourcetest.ServiceOption) *resourcetest.Service {
	t.Helper()
	opts = append([]resourcetest.ServiceOption{resourcetest.WithTypes(foo.RegisterTypes)}, opts...)
	return resourcetest.StartService(t, opts...)
}

// hookClient runs a test's hooks before forwarding WriteStatus and Write
// calls; a hook's error is returned instead of forwarding the call. n
// counts the calls of each method, from 1.
type hookClient struct {
	pbresource.ResourceServiceClient
	beforeWriteStatus func(n int) error
	beforeWrite       func(n int) error

	mu                    sync.Mutex
	writeStatuses, writes int
}

func (c *hookClient) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	c.mu.Lock()
	c.writeStatuses++
	n := c.writeStatuses
	c.mu.Unlock()
	if c.beforeWriteStatus != nil {
		if err := c.beforeWriteStatus(n); err != nil {
			return nil, err
		}
	}
	return c.ResourceServiceClient.WriteStatus(ctx, in, opts...)
}

func (c *hookClient) Write(ctx context.Context, in *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	c.mu.Lock()
	c.writes++
	n := c.writes
	c.mu.Unlock()
	if c.beforeWrite != nil {
		if err := c.beforeWrite(n); err != nil {
			return nil, err
		}
	}
	return c.ResourceServiceClient.Write(ctx, in, opts...)
}
