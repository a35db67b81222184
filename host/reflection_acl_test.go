package host_test

import (
	"context"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/status"
)

// TestReflectionNeedsCapability runs a host with an ACL file: gRPC
// reflection (v1 and v1alpha) is Unauthenticated without a known token,
// PermissionDenied for a token without the reflection capability (even one
// that may write everything), and served to a token with it.
func TestReflectionNeedsCapability(t *testing.T) {
	acl := `tokens:
  - name: admin
    secret: "admin-secret"
    rules:
      - {type: "*.*.*", partition: "*", namespace: "*", access: write}
  - name: grpcurl
    secret: "grpcurl-secret"
    rules:
      - {capability: reflection}
`
	h := startHost(t, "-dev", "-acl-file", writeFile(t, t.TempDir(), "acl.yaml", []byte(acl)))
	conn, err := grpc.NewClient(h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	listV1 := func(ctx context.Context) error {
		stream, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			return err
		}
		defer stream.CloseSend()
		// A stream the server ended already refuses the Send with io.EOF;
		// its status is Recv's.
		if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil && err != io.EOF {
			return err
		}
		rsp, err := stream.Recv()
		if err == nil && len(rsp.GetListServicesResponse().GetService()) == 0 {
			t.Errorf("v1 reflection listed no service: %v", rsp)
		}
		return err
	}
	listV1Alpha := func(ctx context.Context) error {
		stream, err := reflectionv1alpha.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
		if err != nil {
			return err
		}
		defer stream.CloseSend()
		// A stream the server ended already refuses the Send with io.EOF;
		// its status is Recv's.
		if err := stream.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}}); err != nil && err != io.EOF {
			return err
		}
		rsp, err := stream.Recv()
		if err == nil && len(rsp.GetListServicesResponse().GetService()) == 0 {
			t.Errorf("v1alpha reflection listed no service: %v", rsp)
		}
		return err
	}
	as := func(secret string) context.Context {
		if secret == "" {
			return ctx
		}
		return metadata.AppendToOutgoingContext(ctx, "x-consul-token", secret)
	}
	for _, c := range []struct {
		secret string
		want   codes.Code
	}{
		{"", codes.Unauthenticated},
		{"no-such-secret", codes.Unauthenticated},
		{"admin-secret", codes.PermissionDenied},
		{"grpcurl-secret", codes.OK},
	} {
		if err := listV1(as(c.secret)); status.Code(err) != c.want {
			t.Errorf("v1 reflection with token %q: got %v, want %v", c.secret, err, c.want)
		}
		if err := listV1Alpha(as(c.secret)); status.Code(err) != c.want {
			t.Errorf("v1alpha reflection with token %q: got %v, want %v", c.secret, err, c.want)
		}
	}
}
