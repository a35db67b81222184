package main

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
)

// A server that serves only v1alpha reflection (older grpc-go) still
// describes its types.
func TestTypesFromV1alphaReflection(t *testing.T) {
	md := widget(t)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	reflectionv1alpha.RegisterServerReflectionServer(gs, reflection.NewServer(reflection.ServerOptions{Services: gs}))
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r, err := newTypeResolver(context.Background(), conn, "", defaultTimeout)
	if err != nil {
		t.Fatal(err)
	}
	mt, err := r.FindMessageByURL("type.googleapis.com/" + string(md.FullName()))
	if err != nil {
		t.Fatalf("resolving the widget through v1alpha: %v", err)
	}
	if mt.Descriptor().FullName() != md.FullName() || mt.Descriptor().Fields().ByName("ttl") == nil {
		t.Errorf("resolved %v", mt.Descriptor().FullName())
	}
	if _, err := r.FindMessageByName("loom.clitest.v1.Nope"); err == nil {
		t.Error("an unknown type resolved")
	}
}
