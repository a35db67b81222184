// Package etcdtest runs etcd servers embedded in the calling process
// (go.etcd.io/etcd/server/v3/embed) for tests: a single member on free
// loopback ports with Start (StartTLS over TLS), or one member of a cluster
// with StartMember; and a Proxy in front of one that a test can cut or
// stall.
// Nothing needs to be installed. Members are tuned for tests: data is not
// synced to disk (it dies with the test), the backend quota is small, and
// the server's own log goes to a file or nowhere.
package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// Member describes one etcd member to start.
type Member struct {
	// Name is the member's name in the cluster. Required.
	Name string
	// Dir is the member's data directory. Required.
	Dir string
	// ClientURL and PeerURL are where the member serves clients and its
	// peers (http, loopback in tests).
	ClientURL, PeerURL url.URL
	// InitialCluster lists every member of a new cluster as
	// "name=peer URL" pairs separated by commas; empty for a cluster of this
	// member alone.
	InitialCluster string
	// ClusterToken tells clusters apart; members of one cluster share it.
	ClusterToken string
	// LogFile receives the member's log (warnings and errors); empty
	// discards it.
	LogFile string
	// CertFile and KeyFile, when set, are the PEM certificate and key the
	// member presents to clients: ClientURL is then https. The member
	// reads them at each handshake, so replacing them changes what new
	// connections see.
	CertFile, KeyFile string
}

// StartMember starts m and returns without waiting for it to be ready: a
// member of a cluster is ready only once a quorum of its peers runs. Wait
// on the result's Server.ReadyNotify(). The caller closes it.
func StartMember(m Member) (*embed.Etcd, error) {
	if m.Name == "" || m.Dir == "" {
		return nil, errors.New("etcdtest: a member needs a name and a data directory")
	}
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.Dir
	if m.CertFile != "" {
		m.ClientURL.Scheme = "https"
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: m.CertFile, KeyFile: m.KeyFile}
	}
	cfg.ListenClientUrls = []url.URL{m.ClientURL}
	cfg.AdvertiseClientUrls = []url.URL{m.ClientURL}
	cfg.ListenPeerUrls = []url.URL{m.PeerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.PeerURL}
	cfg.InitialCluster = m.InitialCluster
	if cfg.InitialCluster == "" {
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	}
	if m.ClusterToken != "" {
		cfg.InitialClusterToken = m.ClusterToken
	}
	cfg.ListenMetricsUrls = nil
	cfg.EnableGRPCGateway = false
	cfg.UnsafeNoFsync = true
	cfg.QuotaBackendBytes = 512 << 20
	cfg.Logger = "zap"
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{"/dev/null"}
	if m.LogFile != "" {
		cfg.LogOutputs = []string{m.LogFile}
	}
	return embed.StartEtcd(cfg)
}

// FreeURL returns an http URL on a loopback port that was free a moment
// ago. Another process may take it before it is bound; callers retry.
func FreeURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

// Start runs a single-member etcd in a temporary directory until the test
// ends, and returns its client endpoint ("127.0.0.1:port").
func Start(t testing.TB) string {
	t.Helper()
	return StartTLS(t, "", "")
}

// StartTLS is Start with the member serving clients over TLS with the
// certificate and key in certFile and keyFile (read at each handshake);
// plaintext when they are empty.
func StartTLS(t testing.TB, certFile, keyFile string) string {
	t.Helper()
	dir := t.TempDir()
	var lastErr error
	// A port picked free may be taken before etcd binds it: try again.
	for attempt := range 5 {
		e, endpoint, err := startOne(filepath.Join(dir, fmt.Sprint(attempt)), certFile, keyFile)
		if err == nil {
			t.Cleanup(e.Close)
			return endpoint
		}
		lastErr = err
	}
	t.Fatalf("etcdtest: starting etcd: %v", lastErr)
	return ""
}

func startOne(dir, certFile, keyFile string) (*embed.Etcd, string, error) {
	client, err := FreeURL()
	if err != nil {
		return nil, "", err
	}
	peer, err := FreeURL()
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", err
	}
	e, err := StartMember(Member{
		Name: "test", Dir: filepath.Join(dir, "data"), ClientURL: client, PeerURL: peer,
		LogFile: filepath.Join(dir, "etcd.log"), CertFile: certFile, KeyFile: keyFile,
	})
	if err != nil {
		return nil, "", err
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, client.Host, nil
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, "", errors.New("etcd did not become ready within 30s")
	}
}
