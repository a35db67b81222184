package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/inmem"
)

// TestWatchAuthFailureIsLoud checks that a Manager whose watches are refused
// for want of a valid token (Unauthenticated here, or Consul's Internal
// "ACL not found") says so at error level, not in debug lines nobody reads.
func TestWatchAuthFailureIsLoud(t *testing.T) {
	for _, refusal := range []error{
		status.Error(codes.Unauthenticated, "no token"),
		status.Error(codes.Internal, "ACL not found"),
	} {
		t.Run(status.Code(refusal).String(), func(t *testing.T) {
			reg := resource.NewRegistry()
			require.NoError(t, foo.RegisterTypes(reg))
			svc := server.New(server.Config{Backend: inmem.New(), Registry: reg,
				ACLResolver: func(context.Context) (resource.Authorizer, error) { return nil, refusal }})
			logs := &testlog.Buffer{}
			m, err := controller.NewManager(server.NewInProcessClient(svc),
				hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Error}),
				controller.WithWatchRetry(time.Millisecond, 20*time.Millisecond))
			require.NoError(t, err)
			m.MustRegister(controller.NewController("bar", foo.BarV1Type).
				WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })))
			m.SetLeader(true)
			runManager(t, m)
			require.Eventually(t, func() bool {
				return strings.Contains(logs.String(), "cannot watch type") && strings.Contains(logs.String(), status.Convert(refusal).Message())
			}, 10*time.Second, 5*time.Millisecond, "logged at error level: %s", logs.String())
		})
	}
}
