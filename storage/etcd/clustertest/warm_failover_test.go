//go:build cluster

package clustertest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	// warmBars is how many Bars the cluster holds when the leader dies: a
	// few tens, so that the new leader's first pass over them (queued when
	// its controller starts) is not what the probe waits for.
	warmBars = 30
	// warmFailoverBound is how long after the leading server's death a Bar
	// written then may wait for the new leader's reconcile: the lease TTL
	// (the dead leader renewed it up to a third of the TTL before it died,
	// so it expires 2/3 TTL to 1 TTL after), plus etcd's expiry check
	// (every 500 ms) and the campaign's watch, plus a reconcile from a warm
	// cache. A cold take-over would add a full prime of every type.
	warmFailoverBound = leaseTTL + time.Second
)

// TestWarmFailover kills the leading server (SIGKILL; etcd's leader lives
// on, so no etcd election adds to the wait) of a cluster holding a few
// tens of reconciled Bars, then writes a Bar through a survivor. The new
// leader, a warm follower until then (/readyz said "following (warm)" and
// its log had "cache primed" for every type before the kill), reconciles
// the Bar within the lease TTL plus a second of the kill, and logs no
// "cache primed" after it: it took over from the cache it kept as a
// follower, without priming again.
func TestWarmFailover(t *testing.T) {
	c := startCluster(t)
	servers := c.servers
	leader := leadingServer(t, servers)
	firstTerm := currentTerm(leader)
	var via *loomServer // the client's server, one that survives
	for _, s := range servers {
		if s != leader {
			via = s
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// The bulk: Bars written and reconciled before the fault.
	w := &writer{client: via.client, acked: map[string]string{}}
	for i := range warmBars {
		w.write(ctx, t, fmt.Sprintf("warm-%02d", i), "before the kill")
	}
	if err := poll(time.Now().Add(30*time.Second), func() error {
		return allReconciled(ctx, via.client, w.snapshot(), false)
	}); err != nil {
		t.Fatalf("before the kill: %v", err)
	}

	// Every server is ready and says how it stands: the leader leads, the
	// others follow with warm caches (primed as followers, and logged).
	for _, s := range servers {
		want := "leader: following (warm)"
		if s == leader {
			want = "leader: leading"
		}
		waitReadyz(t, s, want, 30*time.Second)
		if s != leader && primedLines(s, time.Time{}) == 0 {
			t.Fatalf("%s follows but logged no \"cache primed\": its cache is not warm\n%s", s.node, s.tail(20))
		}
	}

	// The leading server dies; a Bar is written at once through a
	// survivor.
	t.Logf("killing %s (the leading server, term %d)", leader.node, firstTerm)
	killedAt := time.Now()
	leader.kill()
	probe := w.write(ctx, t, "probe", "after the kill")
	probeAcked := time.Now()

	// The new leader reconciles it within the bound. The wait goes on past
	// the bound, so that a slow failover is measured, not only failed.
	var reconciledAt time.Time
	if err := poll(killedAt.Add(warmFailoverBound+20*time.Second), func() error {
		if err := observed(ctx, via.client, probe); err != nil {
			return err
		}
		reconciledAt = time.Now()
		return nil
	}); err != nil {
		t.Fatalf("the Bar written after the kill was not reconciled within %s: %v", warmFailoverBound+20*time.Second, err)
	}
	var newLeader *loomServer
	var started time.Time
	for _, s := range servers {
		if s == leader {
			continue
		}
		for _, l := range s.logLines() {
			if l.Message == "singleton controller starting" && l.int64Field("term") > firstTerm && (started.IsZero() || l.Time.Before(started)) {
				newLeader, started = s, l.Time
			}
		}
	}
	if newLeader == nil {
		t.Fatalf("the Bar was reconciled, but no survivor logged starting the singleton controllers in a term after %d", firstTerm)
	}
	took := reconciledAt.Sub(killedAt)
	t.Logf("failover: %s started the singletons (term %d) %s after the kill; the probe, written %s after the kill, was seen reconciled %s after the kill (bound %s)",
		newLeader.node, currentTerm(newLeader), started.Sub(killedAt).Round(time.Millisecond),
		probeAcked.Sub(killedAt).Round(time.Millisecond), took.Round(time.Millisecond), warmFailoverBound)
	if took > warmFailoverBound {
		t.Errorf("the new leader %s reconciled the Bar written after the kill %s after it, want within %s (the lease TTL plus 1s)",
			newLeader.node, took.Round(time.Millisecond), warmFailoverBound)
	}

	// No re-prime: the new leader took over from the cache it kept as a
	// follower.
	if n := primedLines(newLeader, killedAt); n != 0 {
		t.Errorf("%s logged \"cache primed\" %d times after the kill: it primed again to take over, its cache was not warm", newLeader.node, n)
	}
	waitReadyz(t, newLeader, "leader: leading", 10*time.Second)

	// The survivors stop cleanly (a data race makes the exit status
	// non-zero), and the terms did not overlap.
	var wg sync.WaitGroup
	for _, s := range servers {
		if s != leader {
			wg.Go(func() {
				if err := s.stop(20 * time.Second); err != nil {
					t.Errorf("%s: %v\n%s", s.node, err, s.tail(20))
				}
			})
		}
	}
	wg.Wait()
	for _, s := range servers {
		if strings.Contains(s.output(), "WARNING: DATA RACE") {
			t.Errorf("%s found a data race; see %s", s.node, s.log)
		}
	}
	checkTerms(t, servers, map[*loomServer]cut{leader: {term: firstTerm, at: leader.ended}})
}

// primedLines counts the "cache primed" lines s logged after since.
func primedLines(s *loomServer, since time.Time) int {
	n := 0
	for _, l := range s.logLines() {
		if l.Message == "cache primed" && l.Time.After(since) {
			n++
		}
	}
	return n
}

// waitReadyz waits until s's /readyz answers 200 with the status line
// line.
func waitReadyz(t *testing.T, s *loomServer, line string, within time.Duration) {
	t.Helper()
	addr := httpAddrOf(s)
	hc := &http.Client{Timeout: time.Second}
	if err := poll(time.Now().Add(within), func() error {
		if addr == "" {
			if addr = httpAddrOf(s); addr == "" {
				return fmt.Errorf("%s has not logged its HTTP address", s.node)
			}
		}
		rsp, err := hc.Get("http://" + addr + "/readyz")
		if err != nil {
			return err
		}
		defer rsp.Body.Close()
		body, err := io.ReadAll(rsp.Body)
		if err != nil {
			return err
		}
		if rsp.StatusCode != http.StatusOK || !strings.Contains(string(body), "\n"+line+"\n") {
			return fmt.Errorf("%s: /readyz %d %q, waiting for 200 with %q", s.node, rsp.StatusCode, body, line)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// httpAddrOf returns the address s's HTTP endpoints listen on, from its
// log ("" until it logged it).
func httpAddrOf(s *loomServer) string {
	for _, l := range s.logLines() {
		if l.Message == "HTTP server listening" {
			return l.stringField("addr")
		}
	}
	return ""
}
