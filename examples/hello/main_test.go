package main

import (
	"bytes"
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/hello/greeting"
	pbhellov1 "github.com/loomrt/loom/examples/hello/pbhello/v1"
	"github.com/loomrt/loom/host"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// TestHelloInMemory runs the example host as `hello -dev` would and greets.
func TestHelloInMemory(t *testing.T) {
	addr := startHello(t, "-dev")
	checkGreeter(t, pbresource.NewResourceServiceClient(dial(t, addr)))
}

// TestHelloOnEtcd runs the example host on an embedded etcd, as `hello
// -storage etcd` would, and greets: it elects itself leader and runs the
// greeter.
func TestHelloOnEtcd(t *testing.T) {
	endpoint := etcdtest.Start(t)
	addr := startHello(t, "-storage", "etcd", "-etcd-endpoints", endpoint, "-etcd-prefix", "/hellotest", "-lease-ttl", "2s")
	checkGreeter(t, pbresource.NewResourceServiceClient(dial(t, addr)))
}

// checkGreeter writes Greetings through client and checks the hooks and the
// greeter's status on them.
func checkGreeter(t *testing.T, client pbresource.ResourceServiceClient) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Mutate trims the name; the greeter greets it.
	ann, err := client.Write(ctx, &pbresource.WriteRequest{Resource: greetingResource(t, "ann", &pbhellov1.Greeting{Name: "  Ann "})})
	if err != nil {
		t.Fatalf("Write ann: %v", err)
	}
	var stored pbhellov1.Greeting
	if err := ann.Resource.Data.UnmarshalTo(&stored); err != nil || stored.Name != "Ann" {
		t.Fatalf("stored name %q (%v), want the Mutate hook's \"Ann\"", stored.Name, err)
	}
	waitGreeted(t, client, ann.Resource.Id, "Hello, Ann!")

	// Mutate defaults the name and reply_to's type.
	bob, err := client.Write(ctx, &pbresource.WriteRequest{Resource: greetingResource(t, "bob",
		&pbhellov1.Greeting{ReplyTo: &pbresource.ID{Name: "ann"}})})
	if err != nil {
		t.Fatalf("Write bob: %v", err)
	}
	waitGreeted(t, client, bob.Resource.Id, `Hello, bob! (a reply to greeting "ann")`)

	// Validate refuses a reply to another namespace, naming the field.
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: greetingResource(t, "eve", &pbhellov1.Greeting{
		ReplyTo: &pbresource.ID{Name: "ann", Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "other"}}})})
	if status.Code(err) != codes.InvalidArgument || !regexp.MustCompile(`reply_to`).MatchString(err.Error()) {
		t.Fatalf("Write eve replying across namespaces: got %v, want InvalidArgument naming reply_to", err)
	}
}

// waitGreeted waits until the greeter's status on id reports the
// resource's current generation with message want.
func waitGreeted(t *testing.T, client pbresource.ResourceServiceClient, id *pbresource.ID, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last *pbresource.Resource
	for {
		rsp, err := client.Read(ctx, &pbresource.ReadRequest{Id: id})
		if err == nil {
			last = rsp.Resource
			st := last.GetStatus()[greeting.StatusKey]
			if st.GetObservedGeneration() == last.GetGeneration() && len(st.GetConditions()) == 1 {
				c := st.Conditions[0]
				if c.Type != greeting.ConditionGreeted || c.State != pbresource.Condition_STATE_TRUE || c.Message != want {
					t.Fatalf("greeter's condition on %s: %v, want Greeted TRUE %q", id.Name, c, want)
				}
				return
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("the greeter did not greet %s within 10s; last read: %v (%v)", id.Name, last, err)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}

func greetingResource(t *testing.T, name string, g *pbhellov1.Greeting) *pbresource.Resource {
	t.Helper()
	data, err := anypb.New(g)
	if err != nil {
		t.Fatal(err)
	}
	return &pbresource.Resource{
		Id: &pbresource.ID{
			Type:    greeting.Type,
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
			Name:    name,
		},
		Data: data,
	}
}

// startHello runs the example host (host.Run with main's register) with
// args, gRPC on a free port and no HTTP endpoints, until the test ends, when
// it must stop cleanly. It returns the gRPC address once the host serves.
func startHello(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log := &syncBuffer{}
	done := make(chan error, 1)
	listening := make(chan host.Addrs, 1)
	args = append([]string{"-grpc-addr", "127.0.0.1:0", "-http-addr", ""}, args...)
	go func() {
		done <- host.Run(ctx, args, log, register, host.WithName("hello"),
			host.WithListening(func(a host.Addrs) { listening <- a }))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("hello stopped with %v; log:\n%s", err, log)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("hello did not stop within 15s; log:\n%s", log)
		}
	})
	select {
	case a := <-listening:
		return a.GRPC
	case err := <-done:
		done <- err // for the clean-up
		t.Fatalf("hello exited before listening: %v\nlog:\n%s", err, log)
	case <-time.After(20 * time.Second):
		t.Fatalf("hello did not listen within 20s; log:\n%s", log)
	}
	return ""
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// syncBuffer is a bytes.Buffer safe to write from the host's goroutines
// while the test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
