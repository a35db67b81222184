package host_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// TestDrain stops a host (the context cancellation SIGTERM causes in Main)
// on both backends: /readyz turns 503 and gRPC health NOT_SERVING at once,
// while for -drain-period a new connection is still accepted and served a
// Write and a Read and an open watch gets the change; once the period is
// over the watch ends with Unavailable (watch again elsewhere) and the host
// stops cleanly.
func TestDrain(t *testing.T) {
	const drain = 3 * time.Second
	for _, backend := range []string{"inmem", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			args := []string{"-drain-period", drain.String()}
			if backend == "etcd" {
				args = append(args, "-storage", "etcd", "-etcd-endpoints", etcdtest.Start(t), "-etcd-prefix", "/drain")
			} else {
				args = append(args, "-dev")
			}
			h := startHost(t, args...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			watch, err := pbresource.NewResourceServiceClient(dialHost(t, h.grpcAddr)).WatchList(ctx, &pbresource.WatchListRequest{
				Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"},
			})
			if err != nil {
				t.Fatal(err)
			}
			if ev, err := watch.Recv(); err != nil || ev.GetEndOfSnapshot() == nil {
				t.Fatalf("watch: got %v, %v; want EndOfSnapshot", ev, err)
			}
			if code := readyzCode(t, h.httpAddr); code != http.StatusOK {
				t.Fatalf("/readyz before the stop = %d, want 200", code)
			}

			stopped := make(chan error, 1)
			signalled := time.Now()
			go func() { stopped <- h.stop() }()
			for readyzCode(t, h.httpAddr) != http.StatusServiceUnavailable {
				if time.Since(signalled) > time.Second {
					t.Fatalf("/readyz not 503 within 1s of the stop")
				}
			}

			// Still serving: a new connection, a Write, a Read.
			conn := dialHost(t, h.grpcAddr)
			health, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || health.GetStatus() != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Fatalf("gRPC health while draining: %v, %v; want NOT_SERVING", health, err)
			}
			client := pbresource.NewResourceServiceClient(conn)
			w, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "default", "drained", "B")})
			if err != nil {
				t.Fatalf("Write on a new connection while draining: %v\nlog:\n%s", err, h.log)
			}
			if _, err := client.Read(ctx, &pbresource.ReadRequest{Id: w.GetResource().GetId()}); err != nil {
				t.Fatalf("Read on a new connection while draining: %v", err)
			}
			if took := time.Since(signalled); took >= drain {
				t.Fatalf("the checks took %v, past the %v drain period: they prove nothing", took, drain)
			}
			if ev, err := watch.Recv(); err != nil || ev.GetUpsert().GetResource().GetId().GetName() != "drained" {
				t.Fatalf("watch while draining: got %v, %v; want the upsert of drained", ev, err)
			}

			// The drain is over: the watch ends with Unavailable (after
			// the example controller's updates of drained).
			for err == nil {
				_, err = watch.Recv()
			}
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("watch after the drain: got %v; want Unavailable", err)
			}
			if took := time.Since(signalled); took < drain {
				t.Errorf("the watch ended %v after the stop, before the %v drain period was over", took, drain)
			}
			if err := <-stopped; err != nil {
				t.Fatalf("host stopped with %v\nlog:\n%s", err, h.log)
			}
		})
	}
}

// dialHost returns a client connection to addr, without TLS, closed when
// the test ends.
func dialHost(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// readyzCode returns the status code of /readyz at addr, asked on a
// connection of its own.
func readyzCode(t *testing.T, addr string) int {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	rsp, err := client.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	rsp.Body.Close()
	return rsp.StatusCode
}
