package etcdtest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Proxy is a loopback TCP proxy to an etcd that a test can cut: while it
// is cut, it closes every connection and refuses new ones, as a network
// partition between one client and the cluster would look to that client.
// A test can also stall it: etcd's answers are held back (the requests go
// through), as a cluster that lost its quorum or a hung member would look.
type Proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	// flowing is closed while etcd's answers flow, open while stalled.
	flowing chan struct{}
}

// NewProxy starts a Proxy to target (host:port) until the test ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{l: l, target: target, conns: map[net.Conn]struct{}{}, flowing: make(chan struct{})}
	close(p.flowing)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr returns the address clients connect to ("127.0.0.1:port").
func (p *Proxy) Addr() string { return p.l.Addr().String() }

func (p *Proxy) accept() {
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
func (p *Proxy) pipe(dst, src net.Conn, answers bool) {
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

// SetStalled holds etcd's answers back (true) or lets them, and those
// held, through (false).
func (p *Proxy) SetStalled(stalled bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.setStalledLocked(stalled)
}

func (p *Proxy) setStalledLocked(stalled bool) {
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

// SetCut cuts (true) or restores (false) the connection to etcd. Cutting
// ends a stall.
func (p *Proxy) SetCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		p.setStalledLocked(false)
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *Proxy) close() {
	p.l.Close()
	p.SetCut(true)
	p.wg.Wait()
}
