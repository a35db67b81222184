package host_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// TestReadyzEtcdStall: a host on etcd whose etcd stops answering (its
// answers held back, as when etcd loses its quorum) fails /readyz, naming
// the storage, within 1 s (Kubernetes' default probe timeout), each answer
// coming within 1 s; once etcd answers again, /readyz is 200 again.
func TestReadyzEtcdStall(t *testing.T) {
	proxy := etcdtest.NewProxy(t, etcdtest.Start(t))
	h := startHost(t, "-storage", "etcd", "-etcd-endpoints", proxy.Addr(), "-etcd-prefix", "/readyz", "-controllers=false")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	readyz := func() (int, string, time.Duration) {
		t.Helper()
		asked := time.Now()
		rsp, err := client.Get("http://" + h.httpAddr + "/readyz")
		if err != nil {
			t.Fatalf("GET /readyz: %v", err)
		}
		defer rsp.Body.Close()
		body, _ := io.ReadAll(rsp.Body)
		return rsp.StatusCode, string(body), time.Since(asked)
	}
	waitReady := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			code, body, _ := readyz()
			if code == http.StatusOK {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz still %d %q 10s %s", code, body, what)
			}
		}
	}
	waitReady("after the start")

	proxy.SetStalled(true)
	stalled := time.Now()
	for {
		code, body, took := readyz()
		if took > time.Second {
			t.Fatalf("/readyz took %v with etcd stalled, want at most 1s", took)
		}
		if code == http.StatusServiceUnavailable {
			if !strings.Contains(body, "storage") {
				t.Fatalf("/readyz = 503 %q, want it to name the storage", body)
			}
			t.Logf("/readyz failed %v after the stall: %q", time.Since(stalled), body)
			break
		}
		if time.Since(stalled) > time.Second {
			t.Fatalf("/readyz still %d %q more than 1s after etcd stalled", code, body)
		}
	}

	proxy.SetStalled(false)
	waitReady("after etcd answered again")
}

// TestReadyzLeaderLine: servers on one etcd say on /readyz which one
// leads and how the others follow: warm by default, cold with
// -warm-standby=false. Every one of them is ready, since each serves the
// API whether it leads or not.
func TestReadyzLeaderLine(t *testing.T) {
	endpoint := etcdtest.Start(t)
	args := []string{"-storage", "etcd", "-etcd-endpoints", endpoint, "-etcd-prefix", "/readyz-leader", "-lease-ttl", "1s", "-drain-period", "0s"}
	waitLine := func(h *runningHost, line string) {
		t.Helper()
		waitHTTP(t, "http://"+h.httpAddr+"/readyz", func(code int, body string) bool {
			return code == http.StatusOK && body == "ok\n"+line+"\n"
		})
	}
	leader := startHost(t, append(args, "-node-name", "leader")...)
	waitLine(leader, "leader: leading")
	warm := startHost(t, append(args, "-node-name", "warm")...)
	waitLine(warm, "leader: following (warm)")
	cold := startHost(t, append(args, "-node-name", "cold", "-warm-standby=false")...)
	waitLine(cold, "leader: following (cold)")
}
