package host

import (
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/server"
)

func TestServerFlags(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string // empty: no error
		usage   bool   // the error is a usage error
	}{
		{args: []string{"-dev"}},
		{args: []string{"-dev", "-controllers=false"}},
		{args: []string{"-dev", "-storage", "inmem", "-log-level", "trace", "-grpc-addr", ":0"}},
		{args: nil, wantErr: "loom server -dev", usage: true},
		{args: []string{"-storage", "inmem"}, wantErr: "development server", usage: true},
		{args: []string{"-dev", "-storage", "etcd"}, wantErr: "-dev runs on in-memory storage", usage: true},
		{args: []string{"-dev", "-storage", "consul"}, wantErr: `unknown -storage "consul"`, usage: true},
		{args: []string{"-dev", "-etcd-endpoints", "127.0.0.1:2379"}, wantErr: "-etcd-endpoints is for -storage etcd", usage: true},
		{args: []string{"-dev", "-lease-ttl", "5s"}, wantErr: "-lease-ttl is for -storage etcd", usage: true},
		{args: []string{"-dev", "-warm-standby=false"}, wantErr: "-warm-standby is for -storage etcd: on in-memory storage the server always leads", usage: true},
		{args: []string{"-storage", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-warm-standby=false"}},
		{args: []string{"-storage", "etcd"}, wantErr: "needs -etcd-endpoints", usage: true},
		{args: []string{"-storage", "etcd", "-etcd-endpoints", " , "}, wantErr: "needs -etcd-endpoints", usage: true},
		{args: []string{"-storage", "etcd", "-etcd-endpoints", "127.0.0.1:2379"}},
		{args: []string{"-storage", "etcd", "-etcd-endpoints", "a:2379,b:2379", "-etcd-prefix", "/other",
			"-etcd-ca", "ca.pem", "-etcd-cert", "c.pem", "-etcd-key", "k.pem", "-etcd-username", "u", "-etcd-password", "p",
			"-lease-ttl", "3s", "-node-name", "n1"}},
		{args: []string{"-storage", "etcd", "-etcd-endpoints", "e:2379", "-etcd-cert", "c.pem"}, wantErr: "-etcd-cert and -etcd-key", usage: true},
		{args: []string{"-storage", "etcd", "-etcd-endpoints", "e:2379", "-etcd-password", "p"}, wantErr: "needs -etcd-username", usage: true},
		{args: []string{"-storage", "etcd", "-etcd-endpoints", "e:2379", "-lease-ttl", "500ms"}, wantErr: "at least 1s", usage: true},
		{args: []string{"-storage", "etcd", "-etcd-endpoints", "e:2379", "-lease-ttl", "2500ms"}, wantErr: "whole number of seconds", usage: true},
		{args: []string{"-dev", "-log-level", "loud"}, wantErr: "-log-level", usage: true},
		{args: []string{"-dev", "-shutdown-timeout", "0s"}, wantErr: "-shutdown-timeout", usage: true},
		{args: []string{"-dev", "-drain-period", "-1s"}, wantErr: "-drain-period must not be negative", usage: true},
		{args: []string{"-dev", "-max-resource-bytes", "4096"}},
		{args: []string{"-dev", "-max-resource-bytes", "0"}, wantErr: "-max-resource-bytes", usage: true},
		{args: []string{"-dev", "-watch-log-bytes", "1048576"}},
		{args: []string{"-dev", "-max-list-bytes", "1048576", "-max-large-lists", "1"}},
		{args: []string{"-dev", "-max-list-bytes", "0"}, wantErr: "-max-list-bytes", usage: true},
		{args: []string{"-dev", "-max-large-lists", "0"}, wantErr: "-max-large-lists", usage: true},
		{args: []string{"-dev", "-watch-log-bytes", "0"}, wantErr: "-watch-log-bytes", usage: true},
		{args: []string{"-storage", "etcd", "-etcd-endpoints", "127.0.0.1:2379", "-watch-log-bytes", "1048576"}},
		{args: []string{"-dev", "-history-versions", "5", "-trash-retention", "1h", "-trash-per-type", "10"}},
		{args: []string{"-dev", "-history-versions", "0"}},
		{args: []string{"-dev", "-bulk-max-items", "10", "-bulk-max-bytes", "1024"}},
		{args: []string{"-dev", "-bulk-max-items", "0"}, wantErr: "-bulk-max-items and -bulk-max-bytes must be positive", usage: true},
		{args: []string{"-dev", "-history-versions", "-1"}, wantErr: "-history-versions must not be negative", usage: true},
		{args: []string{"-dev", "-trash-retention", "0s"}, wantErr: "-trash-retention and -trash-per-type must be positive", usage: true},
		{args: []string{"-dev", "-trash-per-type", "0"}, wantErr: "-trash-retention and -trash-per-type must be positive", usage: true},
		{args: []string{"-dev", "extra"}, wantErr: `unexpected argument "extra"`, usage: true},
		{args: []string{"-nope"}, wantErr: "-nope", usage: true},
		{args: []string{"-dev", "-handshake-timeout", "0s"}, wantErr: "-handshake-timeout", usage: true},
		{args: []string{"-dev", "-max-streams-per-conn", "0"}, wantErr: "-max-streams-per-conn", usage: true},
		{args: []string{"-dev", "-max-recv-msg-bytes", "1000"}, wantErr: "-max-recv-msg-bytes (1000) must be above -max-resource-bytes", usage: true},
		{args: []string{"-dev", "-max-resource-bytes", "4096", "-max-recv-msg-bytes", "4096"}, wantErr: "-max-recv-msg-bytes", usage: true},
		{args: []string{"-dev", "-keepalive-min-time", "0s"}, wantErr: "-keepalive-min-time", usage: true},
		{args: []string{"-dev", "-keepalive-time", "500ms"}, wantErr: "-keepalive-time must be at least 1s", usage: true},
		{args: []string{"-dev", "-max-conn-idle", "-1s"}, wantErr: "-max-conn-idle", usage: true},
		{args: []string{"-dev", "-max-conns", "0"}, wantErr: "-max-conns must be positive", usage: true},
		{args: []string{"-dev", "-max-http-conns", "0"}, wantErr: "-max-http-conns must be positive", usage: true},
		{args: []string{"-dev", "-tls-key", "k.pem"}, wantErr: "-tls-cert and -tls-key", usage: true},
		{args: []string{"-dev", "-reload-interval", "0s"}, wantErr: "-reload-interval must be positive", usage: true},
		{args: []string{"-dev", "-tls-client-ca", "ca.pem"}, wantErr: "-tls-client-ca needs", usage: true},
		{args: []string{"-dev", "-http-addr", "", "-pprof"}, wantErr: "-pprof needs", usage: true},
		{args: []string{"-dev", "-http-addr", "", "-http-token-file", "t"}, wantErr: "-http-tls and -http-token-file need -http-addr", usage: true},
		{args: []string{"-dev", "-http-tls"}, wantErr: "-http-tls serves the certificate of -tls-cert", usage: true},
		{args: []string{"-dev", "-tls-cert", "c.pem", "-tls-key", "k.pem", "-tls-client-ca", "ca.pem", "-acl-file", "acl.yaml",
			"-http-addr", "", "-reflection=false", "-handshake-timeout", "1s", "-max-streams-per-conn", "10",
			"-max-recv-msg-bytes", "2000000", "-keepalive-min-time", "30s", "-keepalive-time", "2m", "-max-conn-idle", "1h"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseFlags(&options{name: "loom server"}, tc.args, io.Discard)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
			var u UsageError
			if errors.As(err, &u) != tc.usage {
				t.Errorf("usage error = %v, want %v", !tc.usage, tc.usage)
			}
		})
	}
}

func TestEtcdFlagValues(t *testing.T) {
	t.Setenv(etcdPasswordEnv, "from-env")
	f, err := parseFlags(&options{name: "loom server"}, []string{"-storage", "etcd", "-etcd-endpoints", " a:1, https://b:2 ,", "-etcd-username", "u"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.etcd.endpointList(); !slices.Equal(got, []string{"a:1", "https://b:2"}) {
		t.Errorf("endpoints = %q", got)
	}
	if f.etcd.password != "from-env" {
		t.Errorf("password = %q, want the one from %s", f.etcd.password, etcdPasswordEnv)
	}
	if f.etcd.prefix != "/loom" || f.etcd.leaseTTL != 10*time.Second || f.etcd.nodeName == "" || !f.etcd.warmStandby {
		t.Errorf("defaults: prefix %q, lease TTL %s, node name %q, warm standby %v", f.etcd.prefix, f.etcd.leaseTTL, f.etcd.nodeName, f.etcd.warmStandby)
	}
	if cfg, err := f.etcd.tlsConfig(t.Context(), time.Second, hclog.NewNullLogger()); cfg != nil || err != nil {
		t.Errorf("TLS without TLS flags: %v %v", cfg, err)
	}

	t.Setenv(etcdPasswordEnv, "")
	f, err = parseFlags(&options{name: "loom server"}, []string{"-storage", "etcd", "-etcd-endpoints", "a:1", "-etcd-ca", "/nonexistent/ca.pem"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.etcd.tlsConfig(t.Context(), time.Second, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "-etcd-ca") {
		t.Errorf("a missing CA file: got %v, want an error naming -etcd-ca", err)
	}
}

// TestMaxRecvMsgDefault: the largest message received follows
// -max-resource-bytes unless -max-recv-msg-bytes is given.
func TestMaxRecvMsgDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-dev"}, server.DefaultMaxResourceBytes + recvMsgHeadroom},
		{[]string{"-dev", "-max-resource-bytes", "8388608"}, 8388608 + recvMsgHeadroom},
		{[]string{"-dev", "-max-recv-msg-bytes", "2000000"}, 2000000},
	} {
		f, err := parseFlags(&options{name: "loom server"}, tc.args, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if f.maxRecvMsg != tc.want {
			t.Errorf("%q: largest message received %d, want %d", tc.args, f.maxRecvMsg, tc.want)
		}
	}
}

// TestMaxConnsDefault: -max-conns follows the limit on open files, less
// the HTTP endpoints' connections (none when they are off) and the
// reserve, unless given.
func TestMaxConnsDefault(t *testing.T) {
	fds := fdLimit()
	if fds == 0 || fds > fdLimitCounted {
		t.Skipf("the limit on open files (%d) is unknown or beyond what the default counts", fds)
	}
	n := int(fds)
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"-dev"}, n - 128 - 128 - n/16},
		{[]string{"-dev", "-max-http-conns", "10"}, n - 10 - 128 - n/16},
		{[]string{"-dev", "-http-addr", ""}, n - 128 - n/16},
		{[]string{"-dev", "-max-conns", "7"}, 7},
	} {
		f, err := parseFlags(&options{name: "loom server"}, tc.args, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if f.maxConns != tc.want {
			t.Errorf("%q: -max-conns %d, want %d (limit on open files %d)", tc.args, f.maxConns, tc.want, fds)
		}
	}
	// What is left for connections, for a few limits (0: unknown).
	for fds, want := range map[uint64]int{0: 4096 - 128 - 128 - 256, 1024: 1024 - 128 - 128 - 64, 300: 300 - 128 - 128 - 18, 250: 0, 1 << 40: 1<<20 - 128 - 128 - 1<<16} {
		if got := defaultMaxConns(fds, 128); got != want {
			t.Errorf("defaultMaxConns(%d, 128) = %d, want %d", fds, got, want)
		}
	}
}

// TestDrainPeriodDefault: 5s on etcd, none with -dev (Ctrl-C stops a
// development server at once) unless -drain-period says otherwise.
func TestDrainPeriodDefault(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want time.Duration
	}{
		{args: []string{"-storage", "etcd", "-etcd-endpoints", "e:2379"}, want: 5 * time.Second},
		{args: []string{"-storage", "etcd", "-etcd-endpoints", "e:2379", "-drain-period", "0s"}, want: 0},
		{args: []string{"-dev"}, want: 0},
		{args: []string{"-dev", "-drain-period", "2s"}, want: 2 * time.Second},
	} {
		f, err := parseFlags(&options{name: "loom server"}, tc.args, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", tc.args, err)
		}
		if f.drainPeriod != tc.want {
			t.Errorf("%q: drain period %v, want %v", tc.args, f.drainPeriod, tc.want)
		}
	}
}
