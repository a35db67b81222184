package host

import (
	"context"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/resource"
)

// auditor logs, at info level, every request the ACLs refused: the method,
// the code, the caller's address and the token's name (never its secret).
type auditor struct {
	acls   *acl.Source
	logger hclog.Logger
}

func (a auditor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	rsp, err := handler(ctx, req)
	a.check(ctx, info.FullMethod, err)
	return rsp, err
}

func (a auditor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	err := handler(srv, ss)
	a.check(ss.Context(), info.FullMethod, err)
	return err
}

func (a auditor) check(ctx context.Context, method string, err error) {
	code := status.Code(err)
	if code != codes.PermissionDenied && code != codes.Unauthenticated {
		return
	}
	token := "(none)"
	if secrets := metadata.ValueFromIncomingContext(ctx, resource.TokenMetadataKey); len(secrets) > 0 && secrets[0] != "" {
		token = "(unknown)"
		if authz, ok := a.acls.Policy().Token(secrets[0]); ok {
			token = authz.Name()
		}
	}
	from := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		from = p.Addr.String()
	}
	a.logger.Info("request denied", "method", method, "code", code.String(), "token", token, "peer", from)
}
