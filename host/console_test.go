package host_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// TestConsoleServed: with -ui, on both backends, the host serves the
// console under /ui/: the overview counts what is stored, and a type
// page's live stream reports a resource written over gRPC. Without -ui
// (and without -dev) there is no console.
func TestConsoleServed(t *testing.T) {
	for _, backend := range []string{"inmem", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			args := []string{"-dev"}
			if backend == "etcd" {
				args = []string{"-ui", "-storage", "etcd", "-etcd-endpoints", etcdtest.Start(t), "-etcd-prefix", "/console"}
			}
			h := startHost(t, args...)
			client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
			resourcetest.Resource(foo.ZipType, "z1").WithData(t, &pbfoov1.Zip{}).Write(t, client)
			waitHTTP(t, "http://"+h.httpAddr+"/ui/api/overview", func(code int, body string) bool {
				return code == http.StatusOK && strings.Contains(body, `"type":"foo.v1.Zip","scope":"partition","count":1`)
			})

			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.httpAddr+"/ui/api/events?type=foo.v1.Zip", nil)
			rsp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer rsp.Body.Close()
			lines := bufio.NewScanner(rsp.Body)
			if !lines.Scan() || lines.Text() != ": live" {
				t.Fatalf("the live stream does not start: %q", lines.Text())
			}
			resourcetest.Resource(foo.ZipType, "z2").WithData(t, &pbfoov1.Zip{}).Write(t, client)
			for lines.Scan() {
				if strings.HasPrefix(lines.Text(), "data: ") && strings.Contains(lines.Text(), `"name":"z2"`) {
					return
				}
			}
			t.Fatalf("the live stream did not report z2: %v", lines.Err())
		})
	}
	t.Run("off", func(t *testing.T) {
		h := startHost(t, "-dev", "-ui=false")
		waitHTTP(t, "http://"+h.httpAddr+"/ui/", func(code int, _ string) bool { return code == http.StatusNotFound })
	})
}
