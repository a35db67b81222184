package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/internal/retry"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Backoff between watches when the server answers Unavailable.
const (
	rewatchBase = 100 * time.Millisecond
	rewatchMax  = 10 * time.Second
)

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := newClientFlags(commandHelp{
		name: "watch", args: "TYPE",
		summary: "Watches resources of a type and prints each event as it arrives: first the current\n" +
			"resources, then the end of that snapshot, then changes, until interrupted or -timeout.\n" +
			"-o json prints one JSON event per line; -o table one line per event (EVENT is UPSERT\n" +
			"or DELETE; the end of the snapshot goes to stderr). When the server answers\n" +
			"Unavailable (it is stopping, or this client fell behind), loom watches again after a\n" +
			"backoff, and the server sends a fresh snapshot.",
		example: "loom watch foo.v1.Bar\n" +
			"loom watch foo.v1.Bar -namespace '*' -o table\n" +
			"loom watch foo.v1.Bar -timeout 30s",
	}, stderr, true)
	prefix := c.fs.String("prefix", "", "only names starting with this")
	format := c.fs.String("o", formatJSON, "output `format`: json or table")
	// -timeout means something else here: how long to watch.
	c.fs.Lookup("timeout").Usage = "stop watching after this long and exit 0 (0: until interrupted)"
	c.timeout = 0
	c.fs.Lookup("timeout").DefValue = "0s"
	c.perRequest = func() time.Duration { return defaultTimeout } // the reflection lookups
	if err := c.parse(args, 1, 1); err != nil {
		return err
	}
	if err := checkFormat(*format, formatJSON, formatTable); err != nil {
		return err
	}
	typ, err := resource.ParseType(c.args[0])
	if err != nil {
		return usageError{Err: err}
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	s, err := c.connect(ctx, stderr)
	if err != nil {
		return err
	}
	defer s.Close()
	w := &eventWriter{p: s.printer(*format, stdout)}
	// A Loom server may then send several events per message (Consul
	// ignores the field); watchOnce prints them one by one.
	req := &pbresource.WatchListRequest{Type: typ, Tenancy: c.tenancy(), NamePrefix: *prefix, BatchEvents: true}
	return watchLoop(ctx, s.client, req, w, stderr, retry.NewBackOff(rewatchBase, rewatchMax))
}

// watchLoop watches until ctx ends, watching again after a backoff when a
// stream (or the call that opens it) ends with Unavailable. It returns nil
// when ctx ends, and any other error of the server.
func watchLoop(ctx context.Context, client pbresource.ResourceServiceClient, req *pbresource.WatchListRequest, w *eventWriter, stderr io.Writer, bo backoff.BackOff) error {
	for {
		received, err := watchOnce(ctx, client, req, w)
		if ctx.Err() != nil {
			return nil // interrupted or -timeout: the normal ways to stop
		}
		if _, timed := ctx.Deadline(); timed && status.Code(err) == codes.DeadlineExceeded {
			// -timeout: gRPC may end the stream on the deadline a
			// moment before ctx says it has passed.
			return nil
		}
		if status.Code(err) != codes.Unavailable {
			return err
		}
		if received {
			bo.Reset()
		}
		wait := bo.NextBackOff()
		fmt.Fprintf(stderr, "loom: watch: %s; watching again in %s\n", errorText(err), wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// watchOnce runs one WatchList stream until it fails, printing its events.
// It reports whether any event arrived (to reset the backoff).
func watchOnce(ctx context.Context, client pbresource.ResourceServiceClient, req *pbresource.WatchListRequest, w *eventWriter) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.WatchList(ctx, req)
	if err != nil {
		return false, err
	}
	stream = pbresource.Unbatched(stream)
	w.startSnapshot()
	received := false
	for {
		ev, err := stream.Recv()
		if err != nil {
			return received, err
		}
		received = true
		if err := w.write(ev); err != nil {
			return received, err
		}
	}
}

// eventWriter prints watch events as -o says.
//
// A table's snapshot is printed whole when it ends, aligned; later lines
// are printed as events come, so a column can only grow: a value longer
// than any before shifts the columns after it.
type eventWriter struct {
	p          *printer
	widths     []int // of the table's columns so far
	header     bool  // whether the table's header was printed
	inSnapshot bool
	pending    [][]string // the snapshot's lines, until its end
}

var tableHeader = []string{"EVENT", "NAME", "TENANCY", "AGE", "VERSION", "STATUS"}

// startSnapshot is called when a stream starts: its first events are a
// snapshot.
func (w *eventWriter) startSnapshot() {
	w.inSnapshot = true
	w.pending = w.pending[:0]
}

func (w *eventWriter) flushSnapshot() {
	w.inSnapshot = false
	w.widen(tableHeader)
	if !w.header {
		w.header = true
		fmt.Fprintln(w.p.stdout, w.line(tableHeader))
	}
	for _, cells := range w.pending {
		fmt.Fprintln(w.p.stdout, w.line(cells))
	}
	w.pending = w.pending[:0]
}

func (w *eventWriter) widen(cells []string) {
	for len(w.widths) < len(cells) {
		w.widths = append(w.widths, 0)
	}
	for i, c := range cells {
		w.widths[i] = max(w.widths[i], len(c))
	}
}

func (w *eventWriter) line(cells []string) string {
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", w.widths[i]-len(c)+2))
		}
	}
	return b.String()
}

func (w *eventWriter) write(ev *pbresource.WatchEvent) error {
	var kind string
	var res *pbresource.Resource
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		kind, res = "upsert", e.Upsert.GetResource()
	case *pbresource.WatchEvent_Delete_:
		kind, res = "delete", e.Delete.GetResource()
	case *pbresource.WatchEvent_EndOfSnapshot_:
		kind = "endOfSnapshot"
	default:
		return nil // an event this client does not know: skip it
	}
	if w.p.format == formatTable {
		if res == nil {
			w.flushSnapshot()
			fmt.Fprintln(w.p.stderr, "loom: watch: end of snapshot; what follows are changes")
			return nil
		}
		cells := append([]string{strings.ToUpper(kind)}, strings.Split(w.p.row(res), "\t")...)
		w.widen(cells)
		if w.inSnapshot {
			w.pending = append(w.pending, cells)
			return nil
		}
		_, err := fmt.Fprintln(w.p.stdout, w.line(cells))
		return err
	}
	// JSON, one event per line, in protojson's form.
	body := []byte("{}")
	if res != nil {
		b, err := w.p.resourceJSON(res)
		if err != nil {
			return err
		}
		body = append(append([]byte(`{"resource":`), b...), '}')
	}
	line := append(append([]byte(`{"`+kind+`":`), body...), '}')
	return w.p.writeDoc(line, true)
}
