package controller_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/acl"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/dial"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/testcerts"
	"github.com/loomrt/loom/internal/testkit/testlog"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/server"
)

// aclServer is a Loom server with ACLs from a file, served over gRPC in
// memory, as a host with -acl-file serves them.
type aclServer struct {
	svc  *resourcetest.Service
	src  *acl.Source
	path string
	lis  *bufconn.Listener
}

// startACLServer serves the example types with the ACL file policy. The
// test's own calls through svc.Client (in process) are trusted, as a
// host's controllers are; callers over gRPC are checked.
func startACLServer(t *testing.T, policy string) *aclServer {
	t.Helper()
	path := testcerts.Write(t, filepath.Join(t.TempDir(), "acl.yaml"), []byte(policy))
	src, err := acl.NewSource(path, nil)
	require.NoError(t, err)
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes),
		resourcetest.WithACLResolver(server.TrustInProcess(src.Resolve)))
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(svc.Server.ServerOptions()...)
	svc.Server.Register(gs)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return &aclServer{svc: svc, src: src, path: path, lis: lis}
}

// setPolicy rewrites the ACL file and reloads it, as the host does when
// the file changes.
func (s *aclServer) setPolicy(t *testing.T, policy string) {
	t.Helper()
	testcerts.Write(t, s.path, []byte(policy))
	changed, err := s.src.Reload()
	require.NoError(t, err)
	require.True(t, changed)
}

// dial connects to the server as a remote controller process does, with
// the token tok holds at each call ("" sends none).
func (s *aclServer) dial(t *testing.T, tok *atomic.Value) pbresource.ResourceServiceClient {
	t.Helper()
	conn, err := dial.Dial("passthrough:///bufconn", dial.WithInsecure(), dial.WithDialOptions(
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return s.lis.DialContext(ctx) }),
		grpc.WithPerRPCCredentials(tokenSource{tok})))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return pbresource.NewResourceServiceClient(conn)
}

// tokenSource sends the token it holds now: a token fixed while the
// process runs.
type tokenSource struct{ v *atomic.Value }

func (s tokenSource) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	if tok, _ := s.v.Load().(string); tok != "" {
		return map[string]string{resource.TokenMetadataKey: tok}, nil
	}
	return nil, nil
}

func (tokenSource) RequireTransportSecurity() bool { return false }

const (
	// barReader may watch foo.v1.Bar (write implies list) and nothing else.
	barReader = `tokens:
  - name: ctl
    secret: "ctl-secret"
    rules:
      - {type: "foo.v1.Bar", partition: "*", namespace: "*", access: write}
`
	// zipReader may not watch foo.v1.Bar.
	zipReader = `tokens:
  - name: ctl
    secret: "ctl-secret"
    rules:
      - {type: "foo.v1.Zip", partition: "*", namespace: "*", access: write}
`
	// barAndZip may watch foo.v1.Bar and write foo.v1.Zip.
	barAndZip = barReader + `      - {type: "foo.v1.Zip", partition: "*", namespace: "*", access: write}
`
)

// startWatchingManager runs a Manager with a controller of foo.v1.Bar
// that does nothing, retrying its watch every few milliseconds, and
// returns it with its info-level log and its metrics.
func startWatchingManager(t *testing.T, client pbresource.ResourceServiceClient) (*controller.Manager, *testlog.Buffer, *prometheus.Registry) {
	t.Helper()
	logs := &testlog.Buffer{}
	reg := prometheus.NewRegistry()
	m, err := controller.NewManager(client, hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}),
		controller.WithWatchRetry(time.Millisecond, 5*time.Millisecond), controller.WithMetrics(reg))
	require.NoError(t, err)
	m.MustRegister(controller.NewController("bar", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(context.Context, reconcile.Runtime, reconcile.Request) error { return nil })))
	m.SetLeader(true)
	runManager(t, m)
	return m, logs, reg
}

// refusedWatchCase is a server that refuses the Manager's watch until fix
// is called.
type refusedWatchCase struct {
	name  string
	code  codes.Code
	words []string // the error and the log line say these
	start func(t *testing.T) (client pbresource.ResourceServiceClient, fix func())
}

var refusedWatchCases = []refusedWatchCase{{
	name: "no token", code: codes.Unauthenticated, words: []string{"foo.v1.Bar", "token", "present a token"},
	start: func(t *testing.T) (pbresource.ResourceServiceClient, func()) {
		s := startACLServer(t, barReader)
		var tok atomic.Value
		return s.dial(t, &tok), func() { tok.Store("ctl-secret") }
	},
}, {
	name: "unknown token", code: codes.Unauthenticated, words: []string{"foo.v1.Bar", "token", "present a token"},
	start: func(t *testing.T) (pbresource.ResourceServiceClient, func()) {
		s := startACLServer(t, `tokens: []`)
		var tok atomic.Value
		tok.Store("ctl-secret")
		return s.dial(t, &tok), func() { s.setPolicy(t, barReader) }
	},
}, {
	name: "token without the right", code: codes.PermissionDenied, words: []string{"foo.v1.Bar", "token lacks list on foo.v1.Bar"},
	start: func(t *testing.T) (pbresource.ResourceServiceClient, func()) {
		s := startACLServer(t, zipReader)
		var tok atomic.Value
		tok.Store("ctl-secret")
		return s.dial(t, &tok), func() { s.setPolicy(t, barReader) }
	},
}, {
	// Consul answers a missing or unknown token with Internal "ACL not
	// found" (no Consul server here: a Consul-like one that answers so).
	name: "consul", code: codes.Internal, words: []string{"foo.v1.Bar", "token", "present a token"},
	start: func(t *testing.T) (pbresource.ResourceServiceClient, func()) {
		var ok atomic.Bool
		svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes), resourcetest.ConsulLike(0),
			resourcetest.WithACLResolver(func(context.Context) (resource.Authorizer, error) {
				if ok.Load() {
					return resource.AllowAll, nil
				}
				return nil, status.Error(codes.Internal, "ACL not found")
			}))
		return svc.Client, func() { ok.Store(true) }
	},
}}

// TestWatchRefused: a Manager whose watch the server refuses for want of
// a token or a right says so: WaitPrimed returns early with an error
// naming the type and the fix, CheckPrimed says the same, the metric
// counts every attempt, and the log names the fix once however often the
// Manager retries. Fixing the token heals the same Manager.
func TestWatchRefused(t *testing.T) {
	for _, tc := range refusedWatchCases {
		t.Run(tc.name, func(t *testing.T) {
			client, fix := tc.start(t)
			m, logs, reg := startWatchingManager(t, client)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := m.WaitPrimed(ctx)
			require.Error(t, err)
			require.NoError(t, ctx.Err(), "WaitPrimed returns as soon as the watch is refused, not at the deadline")
			require.Equal(t, tc.code, status.Code(err), "the server's code shows through: %v", err)
			var we *controller.WatchError
			require.True(t, errors.As(err, &we), "%v holds a *WatchError", err)
			require.Equal(t, resource.TypeString(foo.BarV1Type), resource.TypeString(we.Type))
			for _, w := range tc.words {
				require.Contains(t, err.Error(), w)
			}
			checked := m.CheckPrimed()
			require.Error(t, checked)
			require.Equal(t, tc.code, status.Code(checked))
			require.Contains(t, checked.Error(), "foo.v1.Bar")

			// Many retries, one line naming the fix.
			require.Eventually(t, func() bool {
				return counterValue(t, reg, "loom_controller_watch_errors_total", "code", tc.code.String()) >= 20
			}, 10*time.Second, time.Millisecond)
			// One reading of both: the Manager goes on retrying meanwhile.
			families, err := reg.Gather()
			require.NoError(t, err)
			require.Equal(t, counterSum(families, "loom_controller_watch_errors_total"),
				counterSum(families, "loom_controller_watch_errors_total", "type", "foo.v1.Bar"))
			again := m.WaitPrimed(ctx)
			require.Equal(t, tc.code, status.Code(again), "a second WaitPrimed ends at the next refused attempt: %v", again)
			require.NoError(t, ctx.Err())
			out := logs.String()
			require.Equal(t, 1, strings.Count(out, "cannot watch type"), "logged once:\n%s", out)
			line := logLine(out, "cannot watch type")
			require.Contains(t, line, "[ERROR]")
			require.Contains(t, line, "fix=")
			require.Contains(t, line, tc.words[len(tc.words)-1])

			fix()
			require.NoError(t, m.WaitPrimed(ctx), "the same Manager primes once the token is fixed")
			require.NoError(t, m.CheckPrimed())
			require.Eventually(t, func() bool { return strings.Contains(logs.String(), "watch accepted again") },
				10*time.Second, time.Millisecond)
			require.Equal(t, 1, strings.Count(logs.String(), "watch accepted again"), logs.String())
			require.Equal(t, 1, strings.Count(logs.String(), "cannot watch type"), logs.String())
		})
	}
}

// unavailableClient fails every WatchList as an unreachable server does.
type unavailableClient struct {
	pbresource.ResourceServiceClient
}

func (unavailableClient) WatchList(context.Context, *pbresource.WatchListRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	return nil, status.Error(codes.Unavailable, "connection refused")
}

// TestWaitPrimedDeadlineSaysWhy: a failure that retrying may cure does not
// end WaitPrimed early, but its deadline error names the unprimed type and
// the last failure, and still is ctx's error.
func TestWaitPrimedDeadlineSaysWhy(t *testing.T) {
	m, _, reg := startWatchingManager(t, unavailableClient{startService(t).Client})
	require.Eventually(t, func() bool {
		return counterValue(t, reg, "loom_controller_watch_errors_total", "code", "Unavailable") > 0
	}, 10*time.Second, time.Millisecond)

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := m.WaitPrimed(ctx)
	require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "a failure that may pass does not end the wait")
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Equal(t, codes.Unavailable, status.Code(err))
	require.Contains(t, err.Error(), "foo.v1.Bar")
	require.Contains(t, err.Error(), "connection refused")
	require.ErrorContains(t, m.CheckPrimed(), "watch of foo.v1.Bar failed: Unavailable: connection refused")
}

// TestReconcileRefused: a reconciler whose writes the server refuses for
// want of a right is retried with backoff; the refusal is counted by code
// and logged once with the fix, not once per retry nor per resource; a
// right granted later heals it, which is logged once.
func TestReconcileRefused(t *testing.T) {
	s := startACLServer(t, barReader)
	var tok atomic.Value
	tok.Store("ctl-secret")
	logs := &testlog.Buffer{}
	reg := prometheus.NewRegistry()
	m, err := controller.NewManager(s.dial(t, &tok), hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Info}),
		controller.WithMetrics(reg))
	require.NoError(t, err)
	m.MustRegister(controller.NewController("zipper", foo.BarV1Type).
		WithBackoff(time.Millisecond, 5*time.Millisecond).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			data, err := anypb.New(&pbfoov1.Zip{Zap: req.ID.Name})
			if err != nil {
				return err
			}
			_, err = rt.Client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: zipID(req.ID.Name), Data: data}})
			return err
		})))
	m.SetLeader(true)
	for _, n := range []string{"a", "b", "c"} {
		writeBar(t, s.svc.Client, n, n, nil) // trusted, in process
	}
	runManager(t, m)

	require.Eventually(t, func() bool {
		return counterValue(t, reg, "loom_controller_reconcile_auth_errors_total", "code", "PermissionDenied") >= 30
	}, 10*time.Second, time.Millisecond)
	out := logs.String()
	require.Equal(t, 1, strings.Count(out, "reconcile refused by the server"), "logged once:\n%s", out)
	line := logLine(out, "reconcile refused by the server")
	require.Contains(t, line, "[ERROR]")
	require.Contains(t, line, "fix=\"the token lacks a right this controller needs")
	require.NotContains(t, out, "reconcile failed", "a refusal is not also logged as an ordinary failure")
	// Every series names the controller (read from one gathering: the
	// refused reconciles go on meanwhile).
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != "loom_controller_reconcile_auth_errors_total" {
			continue
		}
		for _, series := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range series.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			require.Equal(t, "zipper", labels["controller"], "series %v", labels)
		}
	}

	s.setPolicy(t, barAndZip)
	require.Eventually(t, func() bool {
		rsp, err := s.svc.Client.List(context.Background(), &pbresource.ListRequest{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "*"}})
		return err == nil && len(rsp.Resources) == 3
	}, 10*time.Second, time.Millisecond, "the reconciles succeed once the token may write")
	require.Eventually(t, func() bool { return strings.Contains(logs.String(), "reconciles accepted by the server again") },
		10*time.Second, time.Millisecond)
	require.Equal(t, 1, strings.Count(logs.String(), "reconciles accepted by the server again"), logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), "reconcile refused by the server"), logs.String())
}

// logLine returns the first line of out that contains substr.
func logLine(out, substr string) string {
	i := strings.Index(out, substr)
	if i < 0 {
		return ""
	}
	start := strings.LastIndexByte(out[:i], '\n') + 1
	end := strings.IndexByte(out[i:], '\n')
	if end < 0 {
		return out[start:]
	}
	return out[start : i+end]
}
