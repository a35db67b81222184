package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
	_ "google.golang.org/protobuf/types/known/durationpb" // the widget's file imports duration.proto

	"github.com/loomrt/loom/host"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// These tests build the loom binary and drive it against a server in the
// test process whose type, clitest.v1.Widget, exists only here: a message
// built at run time from a descriptor. The binary knows nothing of it, so it
// must learn it through the server's reflection (or a -protoset file).

// widgetFile is the widget's .proto file, as a descriptor.
var widgetFile = &descriptorpb.FileDescriptorProto{
	Name:       proto.String("loom/clitest/v1/widget.proto"),
	Package:    proto.String("loom.clitest.v1"),
	Syntax:     proto.String("proto3"),
	Dependency: []string{"google/protobuf/duration.proto"},
	MessageType: []*descriptorpb.DescriptorProto{{
		Name: proto.String("Widget"),
		Field: []*descriptorpb.FieldDescriptorProto{
			{Name: proto.String("color"), JsonName: proto.String("color"), Number: proto.Int32(1), Type: descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
			{Name: proto.String("size"), JsonName: proto.String("size"), Number: proto.Int32(2), Type: descriptorpb.FieldDescriptorProto_TYPE_INT32.Enum(), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
			{Name: proto.String("ttl"), JsonName: proto.String("ttl"), Number: proto.Int32(3), Type: descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum(), TypeName: proto.String(".google.protobuf.Duration"), Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()},
		},
	}},
}

var widgetType = &pbresource.Type{Group: "clitest", GroupVersion: "v1", Kind: "Widget"}

var (
	widgetOnce sync.Once
	widgetDesc protoreflect.MessageDescriptor
	widgetErr  error
)

// widget returns the widget's descriptor, registered in protobuf-go's global
// registry of this test process (where the server's reflection looks).
func widget(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	widgetOnce.Do(func() {
		fd, err := protodesc.NewFile(widgetFile, protoregistry.GlobalFiles)
		if err != nil {
			widgetErr = err
			return
		}
		if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
			widgetErr = err
			return
		}
		widgetDesc = fd.Messages().ByName("Widget")
	})
	if widgetErr != nil {
		t.Fatal(widgetErr)
	}
	return widgetDesc
}

// registerWidget registers clitest.v1.Widget, whose size may not be negative.
func registerWidget(md protoreflect.MessageDescriptor) host.RegisterFunc {
	size := md.Fields().ByName("size")
	return func(h *host.Host) error {
		return resource.Register(h.Registry(), resource.Registration[proto.Message]{
			Type:    widgetType,
			Scope:   resource.ScopeNamespace,
			Message: dynamicpb.NewMessageType(md),
			Validate: func(res *resource.Decoded[proto.Message]) error {
				if res.Data.ProtoReflect().Get(size).Int() < 0 {
					return resource.ErrInvalidField{Name: "size", Wrapped: errors.New("may not be negative")}
				}
				return nil
			},
		})
	}
}

// startWidgetServer runs a host serving the widget type on a loopback port
// with args added, and returns its address.
func startWidgetServer(t *testing.T, args ...string) string {
	t.Helper()
	md := widget(t)
	ctx, cancel := context.WithCancel(context.Background())
	log := &testlog.Buffer{}
	done := make(chan error, 1)
	args = append([]string{"-dev", "-grpc-addr", "127.0.0.1:0", "-http-addr", ""}, args...)
	go func() { done <- host.Run(ctx, args, log, registerWidget(md), host.WithName("widget server")) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Error("widget server did not stop within 15s")
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if m := listeningRE.FindStringSubmatch(log.String()); m != nil {
			return m[1]
		}
		select {
		case err := <-done:
			t.Fatalf("widget server exited: %v\nlog:\n%s", err, log)
		case <-time.After(10 * time.Millisecond): // polling for the log line, with a deadline
		}
		if time.Now().After(deadline) {
			t.Fatalf("widget server did not listen within 10s; log:\n%s", log)
		}
	}
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// TestMain removes the binary loomBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// loomBinary builds the loom command once per test run.
func loomBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "loom-cli-test")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "loom")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// cli runs the loom binary with a fixed environment.
type cli struct {
	t   *testing.T
	bin string
	env []string
}

func newCLI(t *testing.T, addr string, env ...string) *cli {
	return &cli{t: t, bin: loomBinary(t), env: append([]string{"LOOM_ADDR=" + addr, "HOME=" + t.TempDir()}, env...)}
}

func (c *cli) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Env = c.env
	return cmd
}

// run runs loom with args and returns its stdout, stderr and exit status.
func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := c.command(ctx, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		c.t.Fatalf("loom %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// ok runs loom and fails the test unless it succeeds.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("loom %v: exit %d\nstdout: %s\nstderr: %s", args, code, out, errOut)
	}
	return out
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// actAsController adds a finalizer to the widget name and writes a status
// for it, as a controller would.
func actAsController(t *testing.T, addr, name string) {
	t.Helper()
	client := pbresource.NewResourceServiceClient(dialServer(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id := &pbresource.ID{Type: widgetType, Name: name}
	read, err := client.Read(ctx, &pbresource.ReadRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	res := proto.Clone(read.Resource).(*pbresource.Resource)
	res.Metadata = map[string]string{resource.FinalizerKey: "ctrl/cleanup"}
	wrote, err := client.Write(ctx, &pbresource.WriteRequest{Resource: res})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.WriteStatus(ctx, &pbresource.WriteStatusRequest{
		Id: wrote.Resource.Id, Version: wrote.Resource.Version, Key: "ctrl",
		Status: &pbresource.Status{ObservedGeneration: wrote.Resource.Generation, Conditions: []*pbresource.Condition{
			{Type: "Ready", State: pbresource.Condition_STATE_TRUE, Reason: "Ok"},
		}},
	}); err != nil {
		t.Fatal(err)
	}
}

// parseDocuments parses the YAML (or JSON, which is YAML) documents of one
// file held in memory, within the default limits.
func parseDocuments(name string, b []byte, types *typeResolver) ([]document, error) {
	lim := defaultInputLimits()
	left := lim.input
	return decodeDocuments(name, bytes.NewReader(b), types, lim, &left)
}
