package host_test

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/server"
)

// TestHandshakeTimeout: a connection that never speaks HTTP/2 is closed
// after -handshake-timeout.
func TestHandshakeTimeout(t *testing.T) {
	h := startHost(t, "-dev", "-handshake-timeout", "200ms")
	conn, err := net.Dial("tcp", h.grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1024)
	for {
		// The server's HTTP/2 settings come first; then the close.
		if _, err = conn.Read(buf); err != nil {
			break
		}
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the idle connection was still open after 10s, with a 200ms handshake timeout")
	}
}

// TestMaxStreamsPerConn: a connection cannot have more streams open than
// -max-streams-per-conn; the next waits until one ends.
func TestMaxStreamsPerConn(t *testing.T) {
	h := startHost(t, "-dev", "-max-streams-per-conn", "2")
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := &pbresource.WatchListRequest{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}}
	var cancels []context.CancelFunc
	for i := 0; i < 2; i++ {
		wctx, wcancel := context.WithCancel(ctx)
		defer wcancel()
		cancels = append(cancels, wcancel)
		w, err := client.WatchList(wctx, req)
		if err != nil {
			t.Fatalf("WatchList %d: %v", i, err)
		}
		if _, err := w.Recv(); err != nil {
			t.Fatalf("WatchList %d: %v", i, err)
		}
	}
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancelShort()
	if w, err := client.WatchList(short, req); err == nil {
		_, err = w.Recv()
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("a third stream on the connection: got %v, want it to wait (DeadlineExceeded)", err)
		}
	} else if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a third stream on the connection: got %v, want it to wait (DeadlineExceeded)", err)
	}
	cancels[0]()
	w, err := client.WatchList(ctx, req)
	if err == nil {
		_, err = w.Recv()
	}
	if err != nil {
		t.Fatalf("a stream once another ended: %v", err)
	}
}

// TestMaxRecvMsgBytes: a message larger than -max-recv-msg-bytes is
// refused with ResourceExhausted before the server reads it; one under it
// reaches the service, whose resource size limit (-max-resource-bytes)
// still applies.
func TestMaxRecvMsgBytes(t *testing.T) {
	h := startHost(t, "-dev", "-max-resource-bytes", "2048", "-max-recv-msg-bytes", "4096")
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "default", "huge", strings.Repeat("x", 8192))})
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("an 8 KiB message: got %v, want ResourceExhausted", err)
	}
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "default", "big", strings.Repeat("x", 3000))})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a 3 KiB resource in a message under the limit: got %v, want InvalidArgument (over -max-resource-bytes)", err)
	}
	if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "default", "small", "x")}); err != nil {
		t.Errorf("a small resource: %v", err)
	}
}

// rawHTTP2 is a plaintext HTTP/2 connection to addr that has sent its
// preface and settings, for tests of what the server does to a connection
// beneath gRPC.
func rawHTTP2(t *testing.T, addr string) (net.Conn, *http2.Framer) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return conn, fr
}

// readGoAway reads frames until a GOAWAY, answering the server's settings
// and pings, and returns it; it fails the test if the connection ends, or
// 10 s pass, first.
func readGoAway(t *testing.T, fr *http2.Framer) *http2.GoAwayFrame {
	t.Helper()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY before the connection ended: %v", err)
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return f
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				if err := fr.WritePing(true, f.Data); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

// TestKeepaliveMinTime: a client may ping once per -keepalive-min-time even
// with no call open; one that pings more often is sent away
// (ENHANCE_YOUR_CALM, "too_many_pings").
func TestKeepaliveMinTime(t *testing.T) {
	h := startHost(t, "-dev", "-keepalive-min-time", "100ms")
	_, fr := rawHTTP2(t, h.grpcAddr)

	// Pings at the allowed pace, with no stream open: answered.
	for i := range 4 {
		if i > 0 {
			time.Sleep(150 * time.Millisecond) // pacing the pings is what is tested
		}
		if err := fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if err := awaitPingAck(fr, byte(i)); err != nil {
			t.Fatalf("ping %d at the allowed pace: %v", i, err)
		}
	}
	// Pings back to back (a few small frames: the socket buffers take
	// them): the server sends the client away.
	for i := range 10 {
		if err := fr.WritePing(false, [8]byte{byte(100 + i)}); err != nil {
			t.Fatal(err)
		}
	}
	g := readGoAway(t, fr)
	if g.ErrCode != http2.ErrCodeEnhanceYourCalm || !strings.Contains(string(g.DebugData()), "too_many_pings") {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_pings", g.ErrCode, g.DebugData())
	}
}

// awaitPingAck reads frames until the ack of the ping whose data starts
// with id, answering the server's settings.
func awaitPingAck(fr *http2.Framer, id byte) error {
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return err
		}
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			return errors.New("GOAWAY " + f.ErrCode.String() + " " + string(f.DebugData()))
		case *http2.SettingsFrame:
			if !f.IsAck() {
				if err := fr.WriteSettingsAck(); err != nil {
					return err
				}
			}
		case *http2.PingFrame:
			if f.IsAck() && f.Data[0] == id {
				return nil
			}
		}
	}
}

// TestMaxConnIdle: a connection with no call open is closed (GOAWAY,
// NO_ERROR) after -max-conn-idle.
func TestMaxConnIdle(t *testing.T) {
	h := startHost(t, "-dev", "-max-conn-idle", "300ms")
	start := time.Now()
	_, fr := rawHTTP2(t, h.grpcAddr)
	g := readGoAway(t, fr)
	if g.ErrCode != http2.ErrCodeNo {
		t.Errorf("GOAWAY %v %q, want NO_ERROR", g.ErrCode, g.DebugData())
	}
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("closed after %s, before -max-conn-idle (300ms)", d)
	}
}

// TestKeepaliveTime: the server pings a connection silent for
// -keepalive-time.
func TestKeepaliveTime(t *testing.T) {
	h := startHost(t, "-dev", "-keepalive-time", "1s")
	_, fr := rawHTTP2(t, h.grpcAddr)
	start := time.Now()
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no ping from the server: %v", err)
		}
		if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
			break
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d := time.Since(start); d < 900*time.Millisecond {
		t.Errorf("pinged after %s, before -keepalive-time (1s)", d)
	}
}

// TestMaxRecvMsgBytesDefault: by default any resource the server would
// store arrives (the message limit is above -max-resource-bytes), and a
// message far above it is refused before it is read.
func TestMaxRecvMsgBytesDefault(t *testing.T) {
	h := startHost(t, "-dev")
	client := pbresource.NewResourceServiceClient(dialPlain(t, h.grpcAddr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name string
		size int
		want codes.Code
	}{
		{"just-under-the-resource-limit", server.DefaultMaxResourceBytes - 40<<10, codes.OK}, // the limit keeps 33 KiB for finalizers
		{"just-over-the-resource-limit", server.DefaultMaxResourceBytes + 1024, codes.InvalidArgument},
		{"over-the-message-limit", server.DefaultMaxResourceBytes + 2*recvHeadroom, codes.ResourceExhausted},
	} {
		_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: bar(t, "default", tc.name, strings.Repeat("x", tc.size))})
		if status.Code(err) != tc.want {
			t.Errorf("%s (%d bytes of data): got %v, want %v", tc.name, tc.size, err, tc.want)
		}
	}
}

// recvHeadroom is -max-recv-msg-bytes's default above -max-resource-bytes.
const recvHeadroom = 64 << 10
