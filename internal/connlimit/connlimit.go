// Package connlimit bounds the connections a server holds open, so that a
// flood of connections cannot use up the process's file descriptors.
//
// A Listener accepts at most its bound of connections at a time. Past the
// bound, a new connection makes room by closing the connection that has
// been idle longest, among those its server marked idle (SetIdle: an HTTP
// keep-alive waiting for its next request); when none is idle, the new
// connection is closed at once (refused) and counted. The connections
// already open keep working either way.
package connlimit

import (
	"net"
	"sync"
)

// Stats are a Listener's counts.
type Stats struct {
	Max     int    // the bound
	Open    int    // connections open now
	Idle    int    // open connections marked idle (see SetIdle)
	Refused uint64 // connections closed at accept because the bound was reached
	Evicted uint64 // idle connections closed to make room for new ones
}

// Listener is a net.Listener holding at most a bound of connections open.
type Listener struct {
	net.Listener
	max int

	mu      sync.Mutex
	open    int
	idle    idleList // oldest first
	refused uint64
	evicted uint64
}

// NewListener bounds the connections of lis to n (at least 1).
func NewListener(lis net.Listener, n int) *Listener {
	return &Listener{Listener: lis, max: max(n, 1)}
}

// Accept returns the next connection within the bound, closing (and
// counting) those beyond it.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if conn := l.admit(c); conn != nil {
			return conn, nil
		}
	}
}

// admit counts c in, closing the longest-idle connection to make room
// when the bound is reached; it returns nil, having closed c, when no
// connection is idle.
func (l *Listener) admit(c net.Conn) *Conn {
	l.mu.Lock()
	var victim *Conn
	if l.open >= l.max {
		if victim = l.idle.front(); victim == nil {
			l.refused++
			l.mu.Unlock()
			c.Close()
			return nil
		}
		l.releaseLocked(victim)
		l.evicted++
	}
	l.open++
	l.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
	}
	return &Conn{Conn: c, l: l}
}

// releaseLocked stops counting c (once).
func (l *Listener) releaseLocked(c *Conn) {
	if c.released {
		return
	}
	c.released = true
	l.idle.remove(c)
	l.open--
}

// SetIdle marks c, a connection this Listener returned, as idle (it may
// be closed to make room for a new connection) or busy. Other connections
// are ignored.
func (l *Listener) SetIdle(c net.Conn, idle bool) {
	conn, ok := c.(*Conn)
	if !ok || conn.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if conn.released {
		return
	}
	l.idle.remove(conn)
	if idle {
		l.idle.pushBack(conn)
	}
}

// Stats returns the Listener's counts.
func (l *Listener) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return Stats{Max: l.max, Open: l.open, Idle: l.idle.n, Refused: l.refused, Evicted: l.evicted}
}

// Conn is a connection a Listener accepted; closing it makes room for
// another.
type Conn struct {
	net.Conn
	l *Listener

	// Guarded by l.mu.
	released   bool
	inIdle     bool
	prev, next *Conn
}

// Close closes the connection and stops counting it.
func (c *Conn) Close() error {
	c.l.mu.Lock()
	c.l.releaseLocked(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// idleList is a doubly linked list of connections, oldest first.
type idleList struct {
	head, tail *Conn
	n          int // connections in it
}

func (q *idleList) front() *Conn { return q.head }

func (q *idleList) pushBack(c *Conn) {
	c.prev, c.next, c.inIdle = q.tail, nil, true
	q.n++
	if q.tail != nil {
		q.tail.next = c
	} else {
		q.head = c
	}
	q.tail = c
}

func (q *idleList) remove(c *Conn) {
	if !c.inIdle {
		return
	}
	if c.prev != nil {
		c.prev.next = c.next
	} else {
		q.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	} else {
		q.tail = c.prev
	}
	c.prev, c.next, c.inIdle = nil, nil, false
	q.n--
}
