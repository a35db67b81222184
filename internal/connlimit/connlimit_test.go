package connlimit_test

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/loomrt/loom/internal/connlimit"
)

// serve accepts connections from a Listener bounded to n, echoing what
// each reads; the server-side connections arrive on the channel.
func serve(t *testing.T, n int) (*connlimit.Listener, <-chan net.Conn) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := connlimit.NewListener(lis, n)
	t.Cleanup(func() { l.Close() })
	accepted := make(chan net.Conn, 100)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			accepted <- c
			go io.Copy(c, c) //nolint:errcheck // ends when the connection closes
		}
	}()
	return l, accepted
}

func dial(t *testing.T, l net.Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echoes reports whether c echoes a byte within a second.
func echoes(c net.Conn) bool {
	if _, err := c.Write([]byte{'x'}); err != nil {
		return false
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := io.ReadFull(c, make([]byte, 1))
	return err == nil
}

// closedByServer reports whether the server closed c: a read ends with
// EOF or a reset within a second, not a timeout.
func closedByServer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func receive(t *testing.T, ch <-chan net.Conn) net.Conn {
	t.Helper()
	select {
	case c := <-ch:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted within 5s")
		return nil
	}
}

func TestRefusesBeyondTheBound(t *testing.T) {
	l, accepted := serve(t, 2)
	a, b := dial(t, l), dial(t, l)
	receive(t, accepted)
	bSrv := receive(t, accepted)
	refused := dial(t, l)
	if !closedByServer(refused) {
		t.Fatal("the connection beyond the bound was not closed")
	}
	if !echoes(a) || !echoes(b) {
		t.Fatal("the connections within the bound stopped working")
	}
	if s := l.Stats(); s != (connlimit.Stats{Max: 2, Open: 2, Refused: 1}) {
		t.Fatalf("stats = %+v, want 2 open of 2, 1 refused", s)
	}

	// Closing one makes room for the next.
	bSrv.Close()
	c := dial(t, l)
	receive(t, accepted)
	if !echoes(c) {
		t.Fatal("a connection after one closed was not served")
	}
	if s := l.Stats(); s.Open != 2 || s.Refused != 1 {
		t.Fatalf("stats = %+v, want 2 open, still 1 refused", s)
	}
}

func TestEvictsTheLongestIdle(t *testing.T) {
	l, accepted := serve(t, 3)
	a, b, c := dial(t, l), dial(t, l), dial(t, l)
	aSrv, bSrv, cSrv := receive(t, accepted), receive(t, accepted), receive(t, accepted)
	// The order of the server-side connections is the order of accept,
	// which may differ from the order of dial: pair them by address.
	byLocal := map[string]net.Conn{}
	for _, s := range []net.Conn{aSrv, bSrv, cSrv} {
		byLocal[s.RemoteAddr().String()] = s
	}
	aSrv, bSrv, cSrv = byLocal[a.LocalAddr().String()], byLocal[b.LocalAddr().String()], byLocal[c.LocalAddr().String()]

	l.SetIdle(bSrv, true)
	l.SetIdle(aSrv, true)
	l.SetIdle(cSrv, true)
	l.SetIdle(cSrv, false) // busy again: not a candidate

	d := dial(t, l)
	receive(t, accepted)
	if !closedByServer(b) {
		t.Fatal("the longest-idle connection was not closed to make room")
	}
	if !echoes(a) || !echoes(c) || !echoes(d) {
		t.Fatal("a connection other than the longest-idle one stopped working")
	}
	e := dial(t, l)
	receive(t, accepted)
	if !closedByServer(a) {
		t.Fatal("the next idle connection was not closed to make room")
	}
	if !closedByServer(dial(t, l)) {
		t.Fatal("with no idle connection left, a new one was not refused")
	}
	if !echoes(c) || !echoes(d) || !echoes(e) {
		t.Fatal("a busy connection stopped working")
	}
	// The server closing an evicted connection again counts nothing twice.
	bSrv.Close()
	if s := l.Stats(); s != (connlimit.Stats{Max: 3, Open: 3, Refused: 1, Evicted: 2}) {
		t.Fatalf("stats = %+v, want 3 open of 3, 1 refused, 2 evicted", s)
	}
}
