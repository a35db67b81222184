package host_test

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
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
