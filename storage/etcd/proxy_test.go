package etcd

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

// proxy is an etcdtest.Proxy to the test etcd, under the names this
// package's tests use.
type proxy struct{ *etcdtest.Proxy }

func newProxy(t testing.TB) *proxy {
	t.Helper()
	return &proxy{etcdtest.NewProxy(t, testEndpoint)}
}

func (p *proxy) addr() string { return p.Addr() }

// client returns an etcd client that talks to the cluster through p.
func (p *proxy) client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{p.addr()},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// setStalled holds etcd's answers back (true) or lets them, and those
// held, through (false).
func (p *proxy) setStalled(stalled bool) { p.SetStalled(stalled) }

// setCut cuts (true) or restores (false) the connection to etcd.
func (p *proxy) setCut(cut bool) { p.SetCut(cut) }
