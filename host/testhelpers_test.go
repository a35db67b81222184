package host_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/host"
	"github.com/loomrt/loom/internal/testkit/testlog"
)

// registerExamples serves the example types and controllers, as `loom
// server` does.
func registerExamples(h *host.Host) error {
	if err := foo.RegisterTypes(h.Registry()); err != nil {
		return err
	}
	return foo.RegisterControllers(h.Manager())
}

// runningHost is a host started by startHost.
type runningHost struct {
	grpcAddr, httpAddr string
	log                *testlog.Buffer
	stop               func() error
}

// startHost runs host.Run with args (and both listeners on free ports) in
// the background until the test ends, and waits until it serves.
func startHost(t testing.TB, args ...string) *runningHost {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &runningHost{log: &testlog.Buffer{}}
	done := make(chan error, 1)
	listening := make(chan host.Addrs, 1)
	args = append([]string{"-grpc-addr", "127.0.0.1:0", "-http-addr", "127.0.0.1:0"}, args...)
	go func() {
		done <- host.Run(ctx, args, h.log, registerExamples, host.WithName("testhost"),
			host.WithListening(func(a host.Addrs) { listening <- a }))
	}()
	select {
	case a := <-listening:
		h.grpcAddr, h.httpAddr = a.GRPC, a.HTTP
	case err := <-done:
		cancel()
		t.Fatalf("host exited before listening: %v\nlog:\n%s", err, h.log)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatalf("host did not listen within 10s; log:\n%s", h.log)
	}
	var once sync.Once // stop may be called from a test's goroutine and its cleanup at once
	var result error
	h.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(15 * time.Second):
				result = errors.New("host did not stop within 15s")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = h.stop() })
	return h
}

// writeFile writes data to name in dir and returns its path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// freshGet GETs url (host:port/path) on a connection of its own and
// returns the body of a 200 answer.
func freshGet(ctx context.Context, url string) (string, error) {
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+url, nil)
	if err != nil {
		return "", err
	}
	rsp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer rsp.Body.Close()
	body, err := io.ReadAll(rsp.Body)
	if err != nil {
		return "", err
	}
	if rsp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("status %d", rsp.StatusCode)
	}
	return string(body), nil
}

// metric returns the value of the sample named (with its labels) on the
// /metrics of the HTTP endpoints at addr.
func metric(t *testing.T, addr, sample string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	body, err := freshGet(ctx, addr+"/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(sample) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no %s", sample)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatalf("/metrics: %s: %v", sample, err)
	}
	return int(v)
}
