package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/internal/retry"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/selector"
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
			"backoff, resuming after the last change it printed when the server still has the\n" +
			"changes since (otherwise the server sends a fresh snapshot, announced by a\n" +
			"newSnapshot event). -since VERSION starts that way: only the changes after VERSION,\n" +
			"a version an earlier watch printed (a resource's, or an endOfSnapshot's, delete's\n" +
			"or bookmark's version in -o json). With -l, only resources that match the selector:\n" +
			"one that stops matching is printed as a delete, one that starts matching as an upsert.",
		example: "loom watch foo.v1.Bar\n" +
			"loom watch foo.v1.Bar -namespace '*' -o table\n" +
			"loom watch foo.v1.Bar -timeout 30s\n" +
			"loom watch foo.v1.Bar -since 4711 -o json\n" +
			"loom watch foo.v1.Bar -l team=payments",
	}, stderr, true)
	prefix := c.fs.String("prefix", "", "only names starting with this")
	format := c.fs.String("o", formatJSON, "output `format`: json or table")
	labels := selectorFlag(c.fs)
	since := c.fs.String("since", "", "print only the changes after this store `version` (a fresh snapshot when the server no longer has them)")
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
	sel, err := selector.Parse(*labels)
	if err != nil {
		return usageError{Err: fmt.Errorf("-l: %w", err)}
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	s, err := c.connect(ctx, stderr)
	if err != nil {
		return c.withHint(err)
	}
	defer s.Close()
	w := &eventWriter{p: s.printer(*format, stdout)}
	if !sel.Empty() {
		// A Consul server ignores the selector: filter again, with one
		// filter across the streams of this watch.
		w.filter = selector.NewWatchFilter(sel, *since != "")
	}
	// A Loom server may then send several events per message (Consul
	// ignores the field); watchOnce prints them one by one.
	req := &pbresource.WatchListRequest{Type: typ, Tenancy: c.tenancy(), NamePrefix: *prefix, SinceVersion: *since, BatchEvents: true, LabelSelector: *labels}
	return c.withHint(watchLoop(ctx, s.client, req, w, stderr, retry.NewBackOff(rewatchBase, rewatchMax), c.hint))
}

// watchLoop watches until ctx ends, watching again after a backoff when a
// stream (or the call that opens it) ends with Unavailable, from where the
// last one left off when the server tells versions. It returns nil when ctx
// ends, and any other error of the server. hint, if not nil, gives advice
// on an Unavailable error, printed once.
func watchLoop(ctx context.Context, client pbresource.ResourceServiceClient, req *pbresource.WatchListRequest, w *eventWriter, stderr io.Writer, bo backoff.BackOff, hint func(error) string) error {
	hinted := false
	// Bookmarks keep the resume point of a quiet type current.
	req.Bookmarks = true
	w.resume, w.resumed = req.SinceVersion, false
	for {
		req.SinceVersion = w.resume
		received, err := watchOnce(ctx, client, req, w)
		if ctx.Err() != nil {
			return nil // interrupted or -timeout: the normal ways to stop
		}
		if _, timed := ctx.Deadline(); timed && status.Code(err) == codes.DeadlineExceeded {
			// -timeout: gRPC may end the stream on the deadline a
			// moment before ctx says it has passed.
			return nil
		}
		if w.resumed && pbresource.SinceVersionRefused(err) {
			// A point this command found itself (not -since) that the
			// server no longer accepts (it restarted with an empty
			// store, say): watch afresh, at once.
			fmt.Fprintf(stderr, "loom: watch: %s; watching afresh\n", errorText(err))
			w.resume, w.resumed = "", false
			continue
		}
		if status.Code(err) != codes.Unavailable {
			return err
		}
		if received {
			bo.Reset()
		}
		wait := bo.NextBackOff()
		fmt.Fprintf(stderr, "loom: watch: %s; watching again in %s\n", errorText(err), wait)
		if hint != nil && !hinted {
			if h := hint(err); h != "" {
				fmt.Fprintf(stderr, "loom: hint: %s\n", h)
				hinted = true
			}
		}
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
	w.startStream(req.SinceVersion != "")
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
	p *printer
	// resume is the version to resume after ("" for none), and resumed
	// whether this command found it on a stream (rather than -since): a
	// point of its own that the server refuses is dropped, -since's is an
	// error.
	resume     string
	resumed    bool
	widths     []int // of the table's columns so far
	header     bool  // whether the table's header was printed
	inSnapshot bool
	pending    [][]string // the snapshot's lines, until its end
	// filter, when not nil, applies -l to the events (again, for a server
	// that ignores label_selector).
	filter *selector.WatchFilter
}

var tableHeader = []string{"EVENT", "NAME", "TENANCY", "AGE", "VERSION", "STATUS"}

// startStream is called when a stream starts: its first events are a
// snapshot, unless it resumes.
func (w *eventWriter) startStream(resuming bool) {
	w.inSnapshot = !resuming
	if !resuming && w.filter != nil {
		// A snapshot defines what the filter must know.
		w.filter = selector.NewWatchFilter(w.filter.Selector(), false)
	}
	w.pending = w.pending[:0]
}

// advance moves the resume point to v, a version after which the stream
// has sent every change. Versions are numbers on Loom's servers; one that
// is not turns resuming off, as a server that tells none does.
func (w *eventWriter) advance(v string) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		w.resume, w.resumed = "", false
		return
	}
	if cur, err := strconv.ParseUint(w.resume, 10, 64); err != nil || n > cur {
		w.resume = v
	}
	w.resumed = true
}

// skip moves the resume point past a change the filter left out.
func (w *eventWriter) skip(ev *pbresource.WatchEvent) {
	if w.inSnapshot {
		return
	}
	if u := ev.GetUpsert(); u != nil {
		w.advance(u.GetResource().GetVersion())
	} else if d := ev.GetDelete(); d != nil {
		w.advance(cmp.Or(d.GetVersion(), d.GetResource().GetVersion()))
	}
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
	if w.filter != nil {
		out, ok := w.filter.Apply(ev)
		if !ok {
			w.skip(ev)
			return nil
		}
		ev = out
	}
	var kind, version string
	var res *pbresource.Resource
	switch e := ev.Event.(type) {
	case *pbresource.WatchEvent_Upsert_:
		kind, res = "upsert", e.Upsert.GetResource()
		if !w.inSnapshot {
			// Inside a snapshot versions come in no order: only its end
			// is a resume point.
			w.advance(res.GetVersion())
		}
	case *pbresource.WatchEvent_Delete_:
		kind, res, version = "delete", e.Delete.GetResource(), e.Delete.GetVersion()
		if !w.inSnapshot {
			w.advance(cmp.Or(version, res.GetVersion()))
		}
	case *pbresource.WatchEvent_EndOfSnapshot_:
		kind, version = "endOfSnapshot", e.EndOfSnapshot.GetVersion()
		if w.p.format != formatTable {
			w.inSnapshot = false // a table's ends when it is printed, below
		}
		if version != "" {
			w.resume = ""
			w.advance(version)
		} else {
			w.resume, w.resumed = "", false // a server that cannot resume
		}
	case *pbresource.WatchEvent_NewSnapshot_:
		kind = "newSnapshot"
		w.startStream(false)
	case *pbresource.WatchEvent_Bookmark_:
		kind, version = "bookmark", e.Bookmark.GetVersion()
		w.advance(version)
		if w.p.format == formatTable {
			return nil
		}
	default:
		return nil // an event this client does not know: skip it
	}
	if w.p.format == formatTable {
		switch kind {
		case "endOfSnapshot":
			w.flushSnapshot()
			fmt.Fprintln(w.p.stderr, "loom: watch: end of snapshot; what follows are changes")
			return nil
		case "newSnapshot":
			fmt.Fprintln(w.p.stderr, "loom: watch: the server no longer has the changes since the last version seen; a fresh snapshot follows")
			return nil
		}
		cells := append([]string{strings.ToUpper(kind)}, strings.Split(w.p.row(res), "\t")...)
		w.widen(cells)
		if w.inSnapshot {
			w.pending = append(w.pending, cells)
			return nil
		}
		if !w.header {
			w.flushSnapshot() // a resumed stream: no snapshot, just the header
		}
		_, err := fmt.Fprintln(w.p.stdout, w.line(cells))
		return err
	}
	// JSON, one event per line, in protojson's form.
	body := []byte("{")
	if res != nil {
		b, err := w.p.resourceJSON(res)
		if err != nil {
			return err
		}
		body = append(append(body, `"resource":`...), b...)
	}
	if version != "" {
		if res != nil {
			body = append(body, ',')
		}
		body = strconv.AppendQuote(append(body, `"version":`...), version)
	}
	body = append(body, '}')
	line := append(append([]byte(`{"`+kind+`":`), body...), '}')
	return w.p.writeDoc(line, true)
}
