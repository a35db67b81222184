//go:build cluster

package clustertest

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// faultProxy forwards TCP connections from a loom server to one etcd
// member, and can slow down or hold what the server sends, one way: etcd's
// answers and watch events always reach the server at once.
//
//   - slow(d) delivers each chunk the server sends d after it was sent, so
//     the server's requests spend d in flight (a slow link);
//   - hold keeps them all (a one-way partition): a request sent before or
//     while held is neither lost nor delivered;
//   - release delivers what was kept, in order, as a late network would,
//     and forwards at once again.
type faultProxy struct {
	ln       net.Listener
	upstream string

	mu    sync.Mutex
	cond  *sync.Cond
	held  bool
	delay time.Duration
	// largest is the largest chunk read while slowed down, for messages.
	largest int
	pipes   []*pipe
	conns   []net.Conn
}

// pipe is the server-to-etcd direction of one connection.
type pipe struct {
	chunks []chunk // read from the server, not yet delivered
	ended  bool    // the server closed its side, or the read failed
}

type chunk struct {
	data []byte
	sent time.Time
}

// newFaultProxy starts a proxy to upstream (host:port) on a free loopback
// port; it stops when the test ends.
func newFaultProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, upstream: upstream}
	p.cond = sync.NewCond(&p.mu)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// addr is where the server connects.
func (p *faultProxy) addr() string { return p.ln.Addr().String() }

// slow delays what the server sends by d (0: none).
func (p *faultProxy) slow(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.cond.Broadcast()
	p.mu.Unlock()
}

// hold starts keeping what the server sends.
func (p *faultProxy) hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// holdIfPending holds the proxy if a chunk of at least minBytes the server
// sent is still undelivered, and reports whether it did.
func (p *faultProxy) holdIfPending(minBytes int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pp := range p.pipes {
		for _, c := range pp.chunks {
			if len(c.data) >= minBytes {
				p.held = true
				return true
			}
		}
	}
	return false
}

// largestSlowed returns the largest chunk the server sent while slowed.
func (p *faultProxy) largestSlowed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.largest
}

// release delivers what was kept and forwards at once again.
func (p *faultProxy) release() {
	p.mu.Lock()
	p.held = false
	p.delay = 0
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *faultProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.held = false
	p.delay = 0
	p.cond.Broadcast()
	p.mu.Unlock()
}

func (p *faultProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			client.Close() // the member is down: the client tries another
			continue
		}
		pp := &pipe{}
		p.mu.Lock()
		p.conns = append(p.conns, client, up)
		p.pipes = append(p.pipes, pp)
		p.mu.Unlock()
		go func() {
			_, _ = io.Copy(client, up)
			client.Close()
		}()
		go p.read(pp, client)
		go p.deliver(pp, up, client)
	}
}

// read takes the server's bytes as they come, so that what is slowed down
// or held is known.
func (p *faultProxy) read(pp *pipe, client net.Conn) {
	for {
		buf := make([]byte, 32<<10)
		n, err := client.Read(buf)
		p.mu.Lock()
		if n > 0 {
			pp.chunks = append(pp.chunks, chunk{data: buf[:n], sent: time.Now()})
			if p.delay > 0 {
				p.largest = max(p.largest, n)
			}
		}
		if err != nil {
			pp.ended = true
		}
		p.cond.Broadcast()
		p.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// deliver writes the server's chunks to etcd in order, each once it is
// due: not while held, and not before its delay has passed.
func (p *faultProxy) deliver(pp *pipe, up, client net.Conn) {
	for {
		p.mu.Lock()
		for p.held || len(pp.chunks) == 0 {
			if !p.held && pp.ended {
				p.mu.Unlock()
				// Let etcd see the end too, after everything sent before it.
				if tc, ok := up.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				} else {
					up.Close()
				}
				return
			}
			p.cond.Wait()
		}
		c := pp.chunks[0]
		if wait := time.Until(c.sent.Add(p.delay)); wait > 0 {
			p.mu.Unlock()
			// The simulated latency itself, not a wait for a condition;
			// short, so a release is seen soon.
			time.Sleep(min(wait, 10*time.Millisecond))
			continue
		}
		pp.chunks = pp.chunks[1:]
		p.mu.Unlock()
		if _, err := up.Write(c.data); err != nil {
			client.Close()
			return
		}
	}
}
