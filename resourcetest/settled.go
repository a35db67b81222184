package resourcetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// watchNews is what one RequireSettled watch reports: that its snapshot
// has ended (primed), a write after it (ev), or the end of the stream (err).
type watchNews struct {
	typ    *pbresource.Type
	primed bool
	ev     *pbresource.WatchEvent
	err    error
}

// RequireSettled fails t if a resource of one of types is written within
// window: the check that a controller has settled, i.e. has nothing left
// to do. It watches each type (every tenancy, any GroupVersion) and fails
// at the first upsert or delete, showing the resource and how far into the
// window it came; it passes when window ends without one. Status writes
// count, since they are writes; a no-op write does not, since the service
// stores nothing and sends no event.
//
// The window starts once every watch has delivered its snapshot (waiting
// for that is bounded by the Client's timeout), so writes made before the
// call are not counted. It is not a sleep: the wait is the observation.
// Call it after waiting for the state the controller should settle in;
// choose a window several times the controller's reaction time (100 ms to
// 1 s). Work scheduled beyond the window, such as a long RequeueAfter, is
// not seen.
func (c *Client) RequireSettled(t T, window time.Duration, types ...*pbresource.Type) {
	t.Helper()
	names := make([]string, len(types))
	for i, typ := range types {
		names[i] = resource.TypeString(typ)
	}
	subject := strings.Join(names, ", ")
	expected := fmt.Sprintf("no write for %s after the watches' snapshots", window)
	fail := func(problem string, res *pbresource.Resource) {
		t.Helper()
		var b strings.Builder
		fmt.Fprintf(&b, "resourcetest: RequireSettled %s\n", subject)
		fmt.Fprintf(&b, "expected: %s\n", expected)
		fmt.Fprintf(&b, "problem:\n%s", indent(problem))
		if res != nil {
			fmt.Fprintf(&b, "\nobserved resource:\n%s", indent(prettyResource(res)))
		}
		fatalf(t, "%s", b.String())
	}
	if len(types) == 0 {
		fail("no type to watch was given", nil)
		return
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	// Stop the watches, and wait for their goroutines, however this ends
	// (fatalf ends the goroutine with runtime.Goexit, which runs defers).
	defer func() {
		cancel()
		wg.Wait()
	}()
	news := make(chan watchNews)
	for _, typ := range types {
		stream, err := c.WatchList(ctx, &pbresource.WatchListRequest{
			Type:    typ,
			Tenancy: &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard},
		})
		if err != nil {
			fail(fmt.Sprintf("watching %s failed: %v", resource.TypeString(typ), err), nil)
			return
		}
		wg.Add(1)
		go func(typ *pbresource.Type) {
			defer wg.Done()
			send := func(n watchNews) bool {
				n.typ = typ
				select {
				case news <- n:
					return true
				case <-ctx.Done():
					return false
				}
			}
			primed := false
			for {
				ev, err := stream.Recv()
				if err != nil {
					send(watchNews{err: err})
					return
				}
				if _, eos := ev.Event.(*pbresource.WatchEvent_EndOfSnapshot_); eos {
					primed = true
					if !send(watchNews{primed: true}) {
						return
					}
					continue
				}
				if primed && !send(watchNews{ev: ev}) {
					return
				}
			}
		}(typ)
	}

	// Wait for every snapshot; the window starts after the last one.
	primeTimer := time.NewTimer(c.timeout)
	defer primeTimer.Stop()
	for waiting := len(types); waiting > 0; {
		select {
		case n := <-news:
			switch {
			case n.err != nil:
				fail(fmt.Sprintf("watching %s failed: %v", resource.TypeString(n.typ), n.err), nil)
				return
			case n.primed:
				waiting--
			}
		case <-primeTimer.C:
			fail(fmt.Sprintf("the watches did not deliver their snapshots within %s", c.timeout), nil)
			return
		}
	}

	start := time.Now()
	windowTimer := time.NewTimer(window)
	defer windowTimer.Stop()
	for {
		select {
		case n := <-news:
			if n.err != nil {
				fail(fmt.Sprintf("watching %s failed %s into the window: %v",
					resource.TypeString(n.typ), time.Since(start).Round(time.Millisecond), n.err), nil)
				return
			}
			switch e := n.ev.Event.(type) {
			case *pbresource.WatchEvent_Upsert_:
				res := e.Upsert.GetResource()
				fail(fmt.Sprintf("%s was written (upsert, version %s) %s into the window",
					resource.IDString(res.GetId()), res.GetVersion(), time.Since(start).Round(time.Millisecond)), res)
				return
			case *pbresource.WatchEvent_Delete_:
				res := e.Delete.GetResource()
				fail(fmt.Sprintf("%s was deleted %s into the window",
					resource.IDString(res.GetId()), time.Since(start).Round(time.Millisecond)), res)
				return
			}
		case <-windowTimer.C:
			return
		}
	}
}
