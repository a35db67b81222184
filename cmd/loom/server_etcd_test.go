package main

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

var becameLeaderRE = regexp.MustCompile(`became leader: term=(\d+)`)

// waitLog waits until re matches log and returns the match.
func waitLog(t *testing.T, log *testlog.Buffer, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if m := re.FindStringSubmatch(log.String()); m != nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line matching %q within %s; log:\n%s", re, within, log)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}

// waitObserved waits until the example controller's status on the Bar
// named name reports the Bar's current generation, read through client.
func waitObserved(t *testing.T, client pbresource.ResourceServiceClient, id *pbresource.ID, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last *pbresource.Resource
	for {
		rsp, err := client.Read(ctx, &pbresource.ReadRequest{Id: id})
		if err == nil {
			last = rsp.Resource
			if last.GetStatus()["foo.bar"].GetObservedGeneration() == last.GetGeneration() {
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the bar controller did not report generation of %s within %s; last read: %v (%v)", id.Name, within, last, err)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}

// TestEtcdServers runs two servers on one embedded etcd: both serve the
// API, one leads and runs the controllers; when it stops, it resigns and
// the other takes over at once, with a later term.
func TestEtcdServers(t *testing.T) {
	endpoint := etcdtest.Start(t)
	args := func(node string) []string {
		return []string{"-storage", "etcd", "-etcd-endpoints", endpoint, "-etcd-prefix", "/loomtest",
			"-grpc-addr", "127.0.0.1:0", "-lease-ttl", "2s", "-node-name", node, "-examples"}
	}
	addrA, logA, stopA := startServer(t, args("a")...)
	termA, _ := strconv.ParseInt(waitLog(t, logA, becameLeaderRE, 10*time.Second)[1], 10, 64)
	addrB, logB, stopB := startServer(t, args("b")...)
	clientA := pbresource.NewResourceServiceClient(dialServer(t, addrA))
	clientB := pbresource.NewResourceServiceClient(dialServer(t, addrB))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Written through b, reconciled by a, visible on both.
	wrote, err := clientB.Write(ctx, &pbresource.WriteRequest{Resource: barResource(t, "one", "First")})
	if err != nil {
		t.Fatalf("Write through b: %v", err)
	}
	waitObserved(t, clientB, wrote.Resource.Id, 10*time.Second)
	waitObserved(t, clientA, wrote.Resource.Id, 10*time.Second)
	if becameLeaderRE.MatchString(logB.String()) {
		t.Fatalf("both servers lead; b's log:\n%s", logB)
	}
	httpA, httpB := httpAddrOf(t, logA), httpAddrOf(t, logB)
	waitLeader(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(httpA)+` +/loomtest/leader +yes\n`+regexp.QuoteMeta(httpB)+` +/loomtest/leader +no\n`), httpA, httpB)

	// a stops: it resigns, b leads with a later term, well within the TTL.
	start := time.Now()
	if err := stopA(); err != nil {
		t.Fatalf("stopping a: %v\nlog:\n%s", err, logA)
	}
	waitLog(t, logA, regexp.MustCompile(`lost leadership: term=`+strconv.FormatInt(termA, 10)), time.Second)
	termB, _ := strconv.ParseInt(waitLog(t, logB, becameLeaderRE, 5*time.Second)[1], 10, 64)
	t.Log(waitLeader(t, regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(httpA)+` +- +error: .*\n`+regexp.QuoteMeta(httpB)+` +/loomtest/leader +yes\n`), httpA, httpB))
	t.Logf("b became leader %s after a began stopping", time.Since(start))
	if termB <= termA {
		t.Errorf("b's term %d is not after a's %d", termB, termA)
	}

	updated, err := clientB.Write(ctx, &pbresource.WriteRequest{Resource: barResource(t, "one", "Second")})
	if err != nil {
		t.Fatalf("Write through b: %v", err)
	}
	waitObserved(t, clientB, updated.Resource.Id, 10*time.Second)
	if err := stopB(); err != nil {
		t.Fatalf("stopping b: %v\nlog:\n%s", err, logB)
	}
}

// TestEtcdServerUnreachable checks that a server whose etcd does not answer
// fails at start-up with a message naming it.
func TestEtcdServerUnreachable(t *testing.T) {
	t.Parallel() // it waits for the etcd dial timeout
	// A port nothing listens on: taken and released.
	u, err := etcdtest.FreeURL()
	if err != nil {
		t.Fatal(err)
	}
	log := &testlog.Buffer{}
	err = run(context.Background(), []string{"server", "-storage", "etcd", "-etcd-endpoints", u.Host,
		"-grpc-addr", "127.0.0.1:0", "-http-addr", ""}, nil, log)
	if err == nil || !regexp.MustCompile(`etcd at .* does not answer`).MatchString(err.Error()) {
		t.Fatalf("got %v, want an error saying etcd does not answer", err)
	}
}

// TestEtcdServerWithoutExamples checks that a production server serves the
// example types only when asked to (-examples): without it a Bar is an
// unregistered type. It also scrapes the etcd backend's watch gauges.
func TestEtcdServerWithoutExamples(t *testing.T) {
	endpoint := etcdtest.Start(t)
	addr, log, stop := startServer(t, "-storage", "etcd", "-etcd-endpoints", endpoint, "-etcd-prefix", "/loomtest-noexamples",
		"-grpc-addr", "127.0.0.1:0", "-lease-ttl", "2s", "-node-name", "plain")
	client := pbresource.NewResourceServiceClient(dialServer(t, addr))
	_, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: barResource(t, "plain", "x")})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "not registered") {
		t.Errorf("Write of a Bar without -examples: got %v, want InvalidArgument: ... not registered", err)
	}

	// The etcd backend's watch gauges: the reaper's cache watches
	// tombstones, so one watch at least is open once the server is primed.
	m := httpListeningRE.FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("no HTTP address in the log:\n%s", log)
	}
	openRE := regexp.MustCompile(`(?m)^loom_storage_watches_open ([1-9]\d*)$`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		rsp, err := http.Get("http://" + m[1] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rsp.Body)
		rsp.Body.Close()
		if openRE.Match(body) && strings.Contains(string(body), "\nloom_storage_watches_dropped_total 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics has no open storage watches after 10s:\n%s", body)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
	if err := stop(); err != nil {
		t.Fatalf("stopping: %v\nlog:\n%s", err, log)
	}
}

// httpAddrOf returns the HTTP address a server logged.
func httpAddrOf(t *testing.T, log *testlog.Buffer) string {
	t.Helper()
	m := httpListeningRE.FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("no HTTP address in the log:\n%s", log)
	}
	return m[1]
}

// waitLeader runs `loom leader` on addrs until its output matches want,
// within 10 s, and returns the output.
func waitLeader(t *testing.T, want *regexp.Regexp, addrs ...string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var out, errOut strings.Builder
		err := run(context.Background(), append([]string{"leader"}, addrs...), &out, &errOut)
		if err == nil && want.MatchString(out.String()) {
			return out.String()
		}
		if time.Now().After(deadline) {
			t.Fatalf("loom leader %v: %v; output:\n%s%s\nwant it to match %q", addrs, err, out.String(), errOut.String(), want)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition, with a deadline
	}
}
