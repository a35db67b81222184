package etcd

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// proxy is a loopback TCP proxy to the test etcd that a test can cut: while
// it is cut, it closes every connection and refuses new ones, as a network
// partition between one client and the cluster would look to that client.
// A test can also stall it: etcd's answers are held back (the requests go
// through), as a cluster that lost its quorum or a hung member would look.
type proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	// flowing is closed while etcd's answers flow, open while stalled.
	flowing chan struct{}
}

func newProxy(t testing.TB) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: testEndpoint, conns: map[net.Conn]struct{}{}, flowing: make(chan struct{})}
	close(p.flowing)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

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

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.conns[up] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(up, c, false)
		go p.pipe(c, up, true)
	}
}

// pipe copies src to dst; answers (etcd to the client) wait while p is
// stalled.
func (p *proxy) pipe(dst, src net.Conn, answers bool) {
	defer p.wg.Done()
	if !answers {
		_, _ = io.Copy(dst, src)
	} else {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				flowing := p.flowing
				p.mu.Unlock()
				<-flowing
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// setStalled holds etcd's answers back (true) or lets them, and those
// held, through (false).
func (p *proxy) setStalled(stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setStalledLocked(stalled)
}

func (p *proxy) setStalledLocked(stalled bool) {
	select {
	case <-p.flowing:
		if stalled {
			p.flowing = make(chan struct{})
		}
	default:
		if !stalled {
			close(p.flowing)
		}
	}
}

// setCut cuts (true) or restores (false) the connection to etcd. Cutting
// ends a stall.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		p.setStalledLocked(false)
	}
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *proxy) close() {
	p.l.Close()
	p.setCut(true)
	p.wg.Wait()
}
