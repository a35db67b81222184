package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
)

var listeningRE = regexp.MustCompile(`gRPC server listening: addr=(\S+)`)

// startServer runs `loom server` with args in the background and returns its
// bound address, its log, and a function that stops it and returns run's
// result.
func startServer(t *testing.T, args ...string) (addr string, log *testlog.Buffer, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	log = &testlog.Buffer{}
	done := make(chan error, 1)
	// The HTTP endpoints on a free port too, so servers run side by side.
	args = append([]string{"server", "-http-addr", "127.0.0.1:0"}, args...)
	go func() { done <- run(ctx, args, io.Discard, log) }()

	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := listeningRE.FindStringSubmatch(log.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-done:
			cancel()
			t.Fatalf("server exited before listening: %v\nlog:\n%s", err, log)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("server did not log its address within 10s; log:\n%s", log)
		}
	}

	var once sync.Once
	var result error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case result = <-done:
			case <-time.After(15 * time.Second):
				result = errors.New("server did not stop within 15s")
			}
		})
		return result
	}
	t.Cleanup(func() { _ = stop() })
	return addr, log, stop
}

func dialServer(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func barResource(t *testing.T, name, baz string) *pbresource.Resource {
	t.Helper()
	data, err := anypb.New(&pbfoov1.Bar{Baz: baz})
	if err != nil {
		t.Fatal(err)
	}
	return &pbresource.Resource{
		Id: &pbresource.ID{
			Type:    foo.BarV1Type,
			Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
			Name:    name,
		},
		Data: data,
	}
}

func bazOf(t *testing.T, res *pbresource.Resource) string {
	t.Helper()
	var bar pbfoov1.Bar
	if err := res.GetData().UnmarshalTo(&bar); err != nil {
		t.Fatalf("decoding %v: %v", res.GetId(), err)
	}
	return bar.Baz
}

func recvEvent(t *testing.T, stream grpc.ServerStreamingClient[pbresource.WatchEvent]) *pbresource.WatchEvent {
	t.Helper()
	ev, err := stream.Recv()
	if err != nil {
		t.Fatalf("WatchList Recv: %v", err)
	}
	return ev
}

// TestDevServer drives `loom server -dev` the way a user would: over a real
// TCP connection, with the example types, reflection and a clean shutdown.
func TestDevServer(t *testing.T) {
	addr, log, stop := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0", "-log-level", "debug")
	conn := dialServer(t, addr)
	client := pbresource.NewResourceServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Write runs the example hooks: baz is lower-cased.
	wrote, err := client.Write(ctx, &pbresource.WriteRequest{Resource: barResource(t, "hello", "Hello World")})
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if got := bazOf(t, wrote.Resource); got != "hello world" {
		t.Errorf("written baz = %q, want the Mutate hook's %q", got, "hello world")
	}
	if wrote.Resource.GetVersion() == "" || wrote.Resource.GetId().GetUid() == "" {
		t.Errorf("written resource lacks a version or uid: %v", wrote.Resource)
	}

	// ... and the Validate hook's error names the field.
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: barResource(t, "empty", "")})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "baz") {
		t.Errorf("Write with empty baz: got %v, want InvalidArgument naming baz", err)
	}

	read, err := client.Read(ctx, &pbresource.ReadRequest{Id: wrote.Resource.Id})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if read.Resource.GetId().GetUid() != wrote.Resource.GetId().GetUid() || bazOf(t, read.Resource) != "hello world" {
		t.Errorf("Read returned %v, want what was written (%v)", read.Resource, wrote.Resource)
	}

	// The dev server runs the example Bar controller, which reports on
	// every Bar in its status.
	deadline := time.Now().Add(5 * time.Second)
	for {
		read, err = client.Read(ctx, &pbresource.ReadRequest{Id: wrote.Resource.Id})
		if err == nil && read.Resource.GetStatus()["foo.bar"].GetObservedGeneration() == read.Resource.GetGeneration() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bar controller never wrote its status; last read: %v %v", read, err)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}

	list, err := client.List(ctx, &pbresource.ListRequest{
		Type:    foo.BarV1Type,
		Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
	})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(list.Resources) != 1 || list.Resources[0].GetId().GetName() != "hello" {
		t.Errorf("List returned %v, want just %q", list.Resources, "hello")
	}

	// WatchList: the snapshot, its end, then a live event.
	watchCtx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	watch, err := client.WatchList(watchCtx, &pbresource.WatchListRequest{
		Type:    foo.BarV1Type,
		Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"},
	})
	if err != nil {
		t.Fatalf("WatchList: %v", err)
	}
	if ev := recvEvent(t, watch); ev.GetUpsert().GetResource().GetId().GetName() != "hello" {
		t.Fatalf("first watch event = %v, want the upsert of %q", ev, "hello")
	}
	if ev := recvEvent(t, watch); ev.GetEndOfSnapshot() == nil {
		t.Fatalf("second watch event = %v, want EndOfSnapshot", ev)
	}
	if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: barResource(t, "second", "Two")}); err != nil {
		t.Fatalf("Write second: %v", err)
	}
	// The controller may update "hello" meanwhile; skip to "second".
	for {
		ev := recvEvent(t, watch)
		name := ev.GetUpsert().GetResource().GetId().GetName()
		if name == "second" {
			break
		}
		if name != "hello" {
			t.Fatalf("live watch event = %v, want the upsert of %q", ev, "second")
		}
	}

	// Reflection lists the service and can describe the example messages,
	// which grpcurl needs to print the Any in a resource's data.
	refl, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	if err := refl.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{},
	}); err != nil {
		t.Fatal(err)
	}
	resp, err := refl.Recv()
	if err != nil {
		t.Fatalf("reflection ListServices: %v", err)
	}
	var services []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		services = append(services, s.GetName())
	}
	for _, want := range []string{"hashicorp.consul.resource.ResourceService", "grpc.health.v1.Health"} {
		if !contains(services, want) {
			t.Errorf("reflection lists %v, want %s among them", services, want)
		}
	}
	if err := refl.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "loom.example.foo.v1.Bar"},
	}); err != nil {
		t.Fatal(err)
	}
	if resp, err := refl.Recv(); err != nil || len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("reflection cannot describe loom.example.foo.v1.Bar: %v %v", resp.GetErrorResponse(), err)
	}
	refl.CloseSend()

	health, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || health.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health check: %v %v, want SERVING", health, err)
	}

	// Shutdown: with the watch still open, run returns promptly and cleanly,
	// and the watcher is told to go elsewhere.
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("run returned %v after cancel, want nil\nlog:\n%s", err, log)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("shutdown took %v with a watch open; it should not wait for the shutdown timeout", took)
	}
	// Events the controller caused before shutdown may still be queued.
	var watchErr error
	for watchErr == nil {
		_, watchErr = watch.Recv()
	}
	if status.Code(watchErr) != codes.Unavailable {
		t.Errorf("open watch after shutdown got %v, want Unavailable", watchErr)
	}
	for _, line := range []string{"shutting down", "stopped"} {
		if !strings.Contains(log.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, log)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestServerMaxResourceBytes: -max-resource-bytes is the size limit the
// server enforces.
func TestServerMaxResourceBytes(t *testing.T) {
	addr, _, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0", "-max-resource-bytes", "4096")
	client := pbresource.NewResourceServiceClient(dialServer(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: barResource(t, "small", strings.Repeat("x", 3000))}); err != nil {
		t.Fatalf("a 3 kB resource: %v", err)
	}
	_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: barResource(t, "big", strings.Repeat("x", 5000))})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "over the limit of 4 KiB") {
		t.Fatalf("a 5 kB resource: got %v, want InvalidArgument over the limit of 4 KiB", err)
	}
}

func TestServerAddressInUse(t *testing.T) {
	addr, _, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0")
	// The timeout only matters if the port were free after all: then run
	// would serve instead of failing.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := run(ctx, []string{"server", "-dev", "-grpc-addr", addr, "-http-addr", ""}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("second server on %s: got %v, want an address-in-use error", addr, err)
	}
}

func TestCommands(t *testing.T) {
	cases := []struct {
		args     []string
		wantCode int
		wantOut  string
		wantErr  string
	}{
		{args: []string{"version"}, wantOut: "loom (devel) (revision unknown, go"}, // a test binary is neither versioned nor stamped
		{args: []string{"--version"}, wantOut: "loom "},
		{args: []string{"help"}, wantOut: "server"},
		{args: []string{"-h"}, wantOut: "Commands:"},
		{args: []string{"help", "server"}, wantOut: "-grpc-addr"},
		{args: []string{"server", "-h"}, wantErr: "-grpc-addr"},
		{args: nil, wantCode: 2, wantErr: "no command"},
		{args: []string{"frobnicate"}, wantCode: 2, wantErr: `unknown command "frobnicate"`},
		{args: []string{"help", "frobnicate"}, wantCode: 2, wantErr: "unknown command"},
		{args: []string{"version", "x"}, wantCode: 2, wantErr: "no arguments"},
		{args: []string{"server"}, wantCode: 2, wantErr: "loom server -dev"},
		{args: []string{"help"}, wantOut: "\n  restore    bring a deleted resource back, or roll a live one back\n"},
		{args: []string{"help", "restore"}, wantOut: "-with-owned"},
		{args: []string{"restore", "foo.v1.Bar", "x", "-expected-version", "1"}, wantCode: 2, wantErr: "-expected-version goes with -version"},
		{args: []string{"diff", "foo.v1.Bar", "x", "1", "2", "3"}, wantCode: 2, wantErr: "want 2 to 4 argument(s)"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.args), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(context.Background(), tc.args, &stdout, &stderr)
			code := exitCode(err, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit code = %d, want %d (err %v)", code, tc.wantCode, err)
			}
			if !strings.Contains(stdout.String(), tc.wantOut) {
				t.Errorf("stdout = %q, want it to contain %q", stdout.String(), tc.wantOut)
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tc.wantErr)
			}
		})
	}
}
