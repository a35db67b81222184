package host_test

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/dial"
	"github.com/loomrt/loom/internal/testkit/testcerts"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/leaderelection"
	"github.com/loomrt/loom/proto/pbresource"
)

const leaseACL = `tokens:
  - name: replica
    secret: "replica-secret"
    rules:
      - {type: "loom.v1.Lease", partition: "default", namespace: "*", access: write}
  - name: no-lease
    secret: "no-lease-secret"
    rules:
      - {type: "foo.v1.Qux", partition: "*", namespace: "*", access: write}
`

// TestRemoteReplicasElectOnTheHost runs two remote replicas' Electors
// against a host over TLS with an ACL token: the host serves loom.v1.Lease
// without being asked, one replica leads, and when it stops the other
// takes over at once. A replica whose token lacks access to the lease
// never leads, and says why in its log.
func TestRemoteReplicasElectOnTheHost(t *testing.T) {
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "test CA")
	crt, key := ca.WriteLeaf(t, dir, "host")
	caFile := ca.WriteCA(t, dir, "ca")
	h := startHost(t, "-dev", "-tls-cert", crt, "-tls-key", key,
		"-acl-file", testcerts.Write(t, filepath.Join(dir, "acl.yaml"), []byte(leaseACL)))

	type replica struct {
		el   *leaderelection.Elector
		stop context.CancelFunc
		done chan error
	}
	start := func(name, token string, logs io.Writer) *replica {
		conn, err := dial.Dial(h.grpcAddr, dial.WithTLS(certs.Files{CA: caFile}), dial.WithToken(token))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		el, err := leaderelection.New(pbresource.NewResourceServiceClient(conn),
			&pbresource.ID{Name: "remote-controllers"}, name,
			leaderelection.WithLeaseDuration(3*time.Second),
			leaderelection.WithRenewDeadline(2*time.Second),
			leaderelection.WithRetryPeriod(25*time.Millisecond),
			leaderelection.WithLogger(hclog.New(&hclog.LoggerOptions{Name: name, Output: logs})))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{el: el, stop: cancel, done: make(chan error, 1)}
		go func() { r.done <- el.Run(ctx) }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 15s; host log:\n%s", what, h.log)
			}
			time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
		}
	}

	deniedLog := &testlog.Buffer{}
	denied := start("denied", "no-lease-secret", deniedLog)
	a, b := start("a", "replica-secret", io.Discard), start("b", "replica-secret", io.Discard)
	waitFor("a replica leads", func() bool { return a.el.Held() != b.el.Held() })
	leader, other := a, b
	if b.el.Held() {
		leader, other = b, a
	}
	waitFor("the other replica sees the leader", func() bool { return other.el.Holder() != "" })

	leader.stop()
	if err := <-leader.done; err != nil {
		t.Fatalf("the leader's Run: %v", err)
	}
	leader.done <- nil // for the cleanup
	stopped := time.Now()
	waitFor("the other replica takes over", other.el.Held)
	if took := time.Since(stopped); took >= 3*time.Second { // an expiry would take the lease duration
		t.Fatalf("the takeover took %v: the lease was not released", took)
	}

	waitFor("the denied replica logs the refusal", func() bool {
		return strings.Contains(deniedLog.String(), "the token needs write access to loom.v1.Lease")
	})
	if denied.el.Held() {
		t.Fatal("the replica without access to the lease holds it")
	}
	select {
	case err := <-denied.done:
		t.Fatalf("the denied replica's Run returned (%v); it should keep trying, in case the ACLs change", err)
	default:
	}
}
