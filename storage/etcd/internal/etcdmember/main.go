// Command etcdmember runs one member of an etcd cluster, embedded
// (go.etcd.io/etcd/server/v3/embed, tuned for tests by etcdtest), so tests
// can start a cluster of separate processes without installing etcd. The
// cluster test (storage/etcd/clustertest) builds and starts it.
//
//	etcdmember -name m1 -data-dir DIR -client-url http://127.0.0.1:P1 -peer-url http://127.0.0.1:P2 \
//	    -initial-cluster m1=http://127.0.0.1:P2,m2=...,m3=... [-cluster-token T] [-log-file F]
//
// It prints "ready" on standard output once the member serves clients (which
// needs a quorum of the cluster to run), and runs until SIGINT or SIGTERM,
// or until its standard input is closed when -stdin-lifetime is set, so a
// harness that dies cannot leave it running.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/loomrt/loom/storage/etcd/etcdtest"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		m             etcdtest.Member
		clientURL     string
		peerURL       string
		readyTimeout  time.Duration
		stdinLifetime bool
	)
	flag.StringVar(&m.Name, "name", "", "member name")
	flag.StringVar(&m.Dir, "data-dir", "", "data directory")
	flag.StringVar(&clientURL, "client-url", "", "URL to serve clients on")
	flag.StringVar(&peerURL, "peer-url", "", "URL to serve peers on")
	flag.StringVar(&m.InitialCluster, "initial-cluster", "", "name=peer URL,... of every member")
	flag.StringVar(&m.ClusterToken, "cluster-token", "", "token shared by the members of the cluster")
	flag.StringVar(&m.LogFile, "log-file", "", "file for etcd's own log (default: discarded)")
	flag.DurationVar(&readyTimeout, "ready-timeout", time.Minute, "how long to wait for the cluster to form")
	flag.BoolVar(&stdinLifetime, "stdin-lifetime", false, "exit when standard input is closed")
	flag.Parse()

	var err error
	if m.ClientURL, err = parseURL(clientURL); err != nil {
		return fail("-client-url: %v", err)
	}
	if m.PeerURL, err = parseURL(peerURL); err != nil {
		return fail("-peer-url: %v", err)
	}
	e, err := etcdtest.StartMember(m)
	if err != nil {
		return fail("starting etcd: %v", err)
	}
	defer e.Close()

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	stdinClosed := make(chan struct{})
	if stdinLifetime {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(stdinClosed)
		}()
	}

	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		return fail("etcd failed: %v", err)
	case <-time.After(readyTimeout):
		return fail("the member was not ready within %s", readyTimeout)
	case <-stop:
		return 0
	case <-stdinClosed:
		return 0
	}
	select {
	case err := <-e.Err():
		return fail("etcd failed: %v", err)
	case <-stop:
	case <-stdinClosed:
	}
	return 0
}

func parseURL(s string) (url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return url.URL{}, err
	}
	if u.Scheme == "" || u.Host == "" {
		return url.URL{}, fmt.Errorf("%q is not a URL like http://127.0.0.1:2379", s)
	}
	return *u, nil
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "etcdmember: "+format+"\n", args...)
	return 1
}
