package robustness

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// Check runs every check on h and returns what is wrong, each problem
// described on its own. Porcupine gives up on a resource after timeout.
func (h *History) Check(timeout time.Duration) []string {
	problems := h.unexpectedErrors()
	problems = append(problems, h.linearizable(timeout)...)
	problems = append(problems, h.eventual()...)
	acks := h.acknowledged()
	for _, w := range h.Watches {
		problems = append(problems, validateWatch(w, acks, h.maybe(), h.Final)...)
	}
	return problems
}

// unexpectedErrors reports errors that the model does not expect of an
// operation: any at all of List and eventual reads but NotFound, and any
// code other than the refusals (Aborted, FailedPrecondition, NotFound) of
// the others (Aborted only with a Version, or when the retries of a
// blanket one ran out), and InvalidArgument of a Write that breaks the
// rules of deletion marks.
func (h *History) unexpectedErrors() []string {
	var problems []string
	for _, op := range h.Ops {
		if op.Output.Unknown {
			continue
		}
		c := op.Output.Code
		ok := c == codes.OK || c == codes.NotFound
		switch op.Input.Kind {
		case KindList:
			ok = c == codes.OK
		case KindWrite, KindWriteStatus, KindDelete:
			ok = ok || c == codes.FailedPrecondition ||
				(c == codes.Aborted && (op.Input.Version != "" || strings.Contains(op.Err, "gave up after"))) ||
				(c == codes.InvalidArgument && op.Input.Kind == KindWrite &&
					(strings.Contains(op.Err, "deletionTimestamp") || strings.Contains(op.Err, "marked for deletion")))
		}
		if !ok && len(problems) < 10 {
			problems = append(problems, fmt.Sprintf("unexpected error: %s: %s", op, op.Err))
		}
	}
	return problems
}

// observation is one resource a read, a List or a watch event returned.
type observation struct {
	res           State
	call, return_ int64
	what          string
	event         bool // a watch event: it only counts as an earlier read
}

// eventual checks every result that need not be linearizable: eventual
// reads, List results and watch events (strong reads take part as the
// earlier reads). Each must be a resource an acknowledged write returned,
// and none may be older than one an earlier read returned (monotonic reads,
// across every client of the one server; an event counts from the moment
// it was received, and is not itself checked: a watch may lag). Only
// results of one server are compared (see Config.Connect).
func (h *History) eventual() []string {
	acks, maybe := h.acknowledged(), h.maybe()
	var problems []string
	fail := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	type key struct {
		name   string
		server int
	}
	byName := make(map[key][]observation)
	for _, op := range h.Ops {
		if op.Output.Code != codes.OK {
			continue
		}
		switch op.Input.Kind {
		case KindReadStrong, KindReadEventual:
			k := key{op.Input.Name, op.Server}
			byName[k] = append(byName[k], observation{op.Output.Res, op.Call, op.Return, op.String(), false})
		case KindList:
			for _, r := range op.Output.List {
				k := key{r.Name, op.Server}
				byName[k] = append(byName[k], observation{r, op.Call, op.Return, fmt.Sprintf("c%d List [%d,%d] item %s %s", op.Client, op.Call, op.Return, r.Name, r), false})
			}
		}
	}
	for _, w := range h.Watches {
		for _, ev := range w.Events() {
			if ev.Kind == EventUpsert {
				k := key{ev.Res.Name, w.Server}
				byName[k] = append(byName[k], observation{ev.Res, ev.At, ev.At, fmt.Sprintf("watch %d event at %d: %s %s", w.ID, ev.At, ev.Res.Name, ev.Res), true})
			}
		}
	}
	for k, obs := range byName {
		for _, o := range obs {
			if a, ok := acks[k.name][o.res.Version]; (!ok || a != o.res) && !maybe(o.res) {
				fail("%s: returns what no acknowledged write returned", o.what)
			}
		}
		// Sweep: by return time, the newest Version returned so far; each
		// observation, by call time, must not be older.
		byReturn := append([]observation(nil), obs...)
		sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].return_ < byReturn[j].return_ })
		byCall := append([]observation(nil), obs...)
		sort.Slice(byCall, func(i, j int) bool { return byCall[i].call < byCall[j].call })
		var newest *observation
		next := 0
		for i := range byCall {
			o := &byCall[i]
			for next < len(byReturn) && byReturn[next].return_ < o.call {
				if newest == nil || versionNumber(byReturn[next].res.Version) > versionNumber(newest.res.Version) {
					newest = &byReturn[next]
				}
				next++
			}
			if !o.event && newest != nil && versionNumber(o.res.Version) < versionNumber(newest.res.Version) {
				fail("not monotonic: %s returns version %s after %s returned version %s", o.what, o.res.Version, newest.what, newest.res.Version)
			}
		}
	}
	return problems
}
