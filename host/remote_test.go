package host_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/certs"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/dial"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/testcerts"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
)

const remoteACL = `tokens:
  - name: remote-controller
    secret: "remote-controller-secret"
    rules:
      - {type: "foo.v1.Qux", partition: "*", namespace: "*", access: write}
  - name: user
    secret: "user-secret"
    rules:
      - {type: "foo.v1.Qux", partition: "*", namespace: "*", access: write}
`

// The environment variables that make this test binary the remote
// controller process of TestRemoteManagerProcess.
const (
	remoteAddrEnv = "LOOM_TEST_REMOTE_ADDR"
	remoteCAEnv   = "LOOM_TEST_REMOTE_CA"
)

// TestRemoteManagerProcess runs a Manager in a separate process (this test
// binary, run again) against a host over TLS with an ACL token: its
// controller reconciles what a user writes to the host.
func TestRemoteManagerProcess(t *testing.T) {
	if addr := os.Getenv(remoteAddrEnv); addr != "" {
		runRemoteManager(t, addr, os.Getenv(remoteCAEnv))
		return
	}
	dir := t.TempDir()
	ca := testcerts.NewAuthority(t, "test CA")
	crt, key := ca.WriteLeaf(t, dir, "host")
	caFile := ca.WriteCA(t, dir, "ca")
	h := startHost(t, "-dev", "-tls-cert", crt, "-tls-key", key,
		"-acl-file", testcerts.Write(t, filepath.Join(dir, "acl.yaml"), []byte(remoteACL)))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRemoteManagerProcess$")
	child.Env = append(os.Environ(), remoteAddrEnv+"="+h.grpcAddr, remoteCAEnv+"="+caFile)
	out := &testlog.Buffer{}
	child.Stdout, child.Stderr = out, out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		_ = child.Wait() // killed: its exit status says nothing
	}()

	conn, err := dial.Dial(h.grpcAddr, dial.WithTLS(certs.Files{CA: caFile}), dial.WithToken("user-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pbresource.NewResourceServiceClient(conn)
	data, err := anypb.New(&pbfoov1.Qux{Note: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	id := &pbresource.ID{Type: foo.QuxType, Name: "q1"}
	if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}}); err != nil {
		t.Fatal(err)
	}
	for {
		rsp, err := client.Read(ctx, &pbresource.ReadRequest{Id: id})
		if err != nil {
			t.Fatal(err)
		}
		if st, ok := rsp.Resource.Status["remote-qux"]; ok && st.ObservedGeneration == rsp.Resource.Generation {
			return // reconciled by the other process
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the remote controller did not reconcile within 60s; its output:\n%s", out)
		case <-time.After(20 * time.Millisecond): // polling a condition, with a deadline
		}
	}
}

// runRemoteManager is the remote controller process: a Manager dialled in
// over TLS with its token, reconciling foo.v1.Qux until it is killed.
func runRemoteManager(t *testing.T, addr, caFile string) {
	conn, err := dial.Dial(addr, dial.WithTLS(certs.Files{CA: caFile}), dial.WithToken("remote-controller-secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m, err := controller.NewManager(pbresource.NewResourceServiceClient(conn), hclog.New(&hclog.LoggerOptions{Name: "remote", Output: os.Stderr}))
	if err != nil {
		t.Fatal(err)
	}
	m.MustRegister(controller.NewController("remote-qux", foo.QuxType).WithReconciler(
		reconcile.AsDecoded(func(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, res *resource.Decoded[*pbfoov1.Qux]) error {
			_, err := rt.WriteStatus(ctx, res.Resource, "remote-qux", &pbresource.Status{
				Conditions: []*pbresource.Condition{{Type: "Seen", State: pbresource.Condition_STATE_TRUE, Message: res.Data.Note}},
			})
			return err
		}, reconcile.DecodedReadOnly())))
	m.SetLeader(true)
	if err := m.Run(context.Background()); err != nil { // until the parent kills this process
		t.Fatal(err)
	}
}
