package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
)

var stuckWatchersFlag = flag.Int("stuck-watchers", 400,
	"how many WatchList clients stop reading in TestShutdownWithStuckWatchers")

// TestShutdownWithStuckWatchers: many WatchList clients stop reading while a
// backlog builds up for them, then the server shuts down. Shutdown must not
// wait for the clients that do not read (it used to take the whole
// -shutdown-timeout), and clients that do read get the documented
// Unavailable "server is shutting down", not a closed transport.
func TestShutdownWithStuckWatchers(t *testing.T) {
	stuckWatchers := *stuckWatchersFlag
	const (
		stuckConns      = 4  // the stuck watchers share these connections
		readingWatchers = 8  // half on a connection of their own, half on a stuck one
		backlogWrites   = 64 // × bazSize: far more than a stream's windows
		bazSize         = 4096
		shutdownTimeout = 10 * time.Second
		shutdownBudget  = 2 * time.Second
	)
	addr, log, stop := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0",
		"-shutdown-timeout", shutdownTimeout.String())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	watchReq := &pbresource.WatchListRequest{
		Type:    foo.BarV1Type,
		Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"},
	}

	// The stuck watchers: each receives the (empty) snapshot, then stops
	// reading. A small fixed flow-control window makes them stall after a
	// few events instead of after gRPC's dynamic window has grown.
	var stuck []grpc.ServerStreamingClient[pbresource.WatchEvent]
	var stuckClients []pbresource.ResourceServiceClient
	for c := 0; c < stuckConns; c++ {
		conn, err := grpc.NewClient(addr,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<20))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		client := pbresource.NewResourceServiceClient(conn)
		stuckClients = append(stuckClients, client)
		for i := 0; i < stuckWatchers/stuckConns; i++ {
			w, err := client.WatchList(ctx, watchReq)
			if err != nil {
				t.Fatalf("WatchList: %v", err)
			}
			if ev := recvEvent(t, w); ev.GetEndOfSnapshot() == nil {
				t.Fatalf("first event of an empty type = %v, want EndOfSnapshot", ev)
			}
			stuck = append(stuck, w)
		}
	}

	// The reading watchers read until their stream ends and report how.
	// Half share a connection with stuck watchers, which that connection's
	// flow control must not hold up.
	readClient := pbresource.NewResourceServiceClient(dialServer(t, addr))
	ended := make(chan error, readingWatchers) // how each stream ended
	var sawLast sync.Map                       // index of each watcher that saw the last write
	last := fmt.Sprintf("bar-%03d", backlogWrites-1)
	for i := 0; i < readingWatchers; i++ {
		c := readClient
		if i%2 == 1 {
			c = stuckClients[0]
		}
		w, err := c.WatchList(ctx, watchReq)
		if err != nil {
			t.Fatalf("WatchList: %v", err)
		}
		go func() {
			for {
				ev, err := w.Recv()
				if err != nil {
					ended <- err
					return
				}
				if ev.GetUpsert().GetResource().GetId().GetName() == last {
					sawLast.Store(i, true)
				}
			}
		}()
	}

	// The backlog: every write is an event for every watcher (and the
	// example controller adds a finalizer and a status to each Bar, two
	// more events).
	conn := dialServer(t, addr)
	client := pbresource.NewResourceServiceClient(conn)
	baz := strings.Repeat("b", bazSize)
	for i := 0; i < backlogWrites; i++ {
		name := fmt.Sprintf("bar-%03d", i)
		if _, err := client.Write(ctx, &pbresource.WriteRequest{Resource: barResource(t, name, baz)}); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	// Wait until the reading watchers have seen the last write. Each stuck
	// stream then has far more queued for it (over 64 × 4 KiB) than its
	// flow-control windows hold (64 KiB at the client, 64 KiB of gRPC's
	// write quota at the server): its handler blocks in Send.
	deadline := time.Now().Add(30 * time.Second)
	for {
		seen := 0
		sawLast.Range(func(any, any) bool {
			seen++
			return true
		})
		if seen == readingWatchers {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d reading watchers saw %s within 30s", seen, readingWatchers, last)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}

	start := time.Now()
	if err := stop(); err != nil {
		t.Fatalf("run returned %v, want nil\nlog:\n%s", err, log)
	}
	took := time.Since(start)
	t.Logf("shutdown with %d stuck watchers took %v", len(stuck), took)
	if took > shutdownBudget {
		t.Errorf("shutdown took %v with %d watchers that do not read; want under %v (timeout %v)",
			took, len(stuck), shutdownBudget, shutdownTimeout)
	}

	for i := 0; i < readingWatchers; i++ {
		select {
		case err := <-ended:
			st := status.Convert(err)
			if st.Code() != codes.Unavailable || st.Message() != "server is shutting down" {
				t.Errorf("a reading watcher ended with %v, want Unavailable: server is shutting down", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("a reading watcher's stream did not end within 10s of shutdown")
		}
	}
	if strings.Contains(log.String(), "still running after the shutdown timeout") {
		t.Errorf("the server waited for the shutdown timeout:\n%s", log)
	}
}
