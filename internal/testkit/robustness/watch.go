package robustness

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// EventKind is the kind of a recorded watch event.
type EventKind int

// The kinds of watch events.
const (
	EventUpsert EventKind = iota
	EventDelete
	EventEndOfSnapshot
)

// WatchEvent is one event a watch delivered, with the time it was
// received (nanoseconds since the run started).
type WatchEvent struct {
	Kind EventKind
	Res  State
	At   int64
}

// WatchRecord is the record of one WatchList stream.
type WatchRecord struct {
	ID     int
	Server int // see Config.Connect
	Opened int64
	// End is how the stream ended: the error Recv returned.
	End string
	// Settled means the stream was open when the clients stopped and
	// delivered the run's last write before the run closed it: what it
	// delivered must add up to the store at the end (History.Final).
	Settled bool

	mu     sync.Mutex
	events []WatchEvent
	newest uint64 // the highest Version of an upsert delivered
}

func (w *WatchRecord) add(ev WatchEvent) {
	w.mu.Lock()
	w.events = append(w.events, ev)
	if ev.Kind == EventUpsert {
		w.newest = max(w.newest, versionNumber(ev.Res.Version))
	}
	w.mu.Unlock()
}

// Events returns the events the stream delivered, in order.
func (w *WatchRecord) Events() []WatchEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events)
}

func (w *WatchRecord) delivered(version uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.newest >= version
}

// ValidateWatch checks what one watch of every resource of the run's type
// delivered against the recorded history, and returns what is wrong:
//
//   - form: snapshot Upserts, exactly one EndOfSnapshot, then Upserts and
//     Deletes; no name twice in the snapshot;
//   - every resource delivered (snapshot, Upsert or Delete) is exactly one
//     an acknowledged write returned (same Version, Uid, Generation, data,
//     metadata and status), or one a write of unknown outcome may have
//     stored (same data, metadata or status): nothing invented or torn;
//   - the snapshot is the store at one revision, as far as the history
//     shows it: with S the highest Version in it, no resource in it has an
//     acknowledged write of a Version above its own and at most S;
//   - order and no duplicate: the Upserts after the snapshot have strictly
//     increasing Versions, all above S;
//   - no gap: with F and L the first and last Upsert Versions after the
//     snapshot, every acknowledged write with a Version in [F, L] was
//     delivered, and so was every acknowledged write of a resource with a
//     Version above one already delivered for it (and at most L);
//   - per resource: an Upsert of a resource the watch holds keeps its Uid
//     and raises its Version, one of a resource it does not hold has a Uid
//     not seen before on the stream, and a Delete carries exactly the
//     Version and Uid last delivered for the resource;
//   - a Settled watch's view (snapshot plus changes) equals the store at
//     the end of the run, which catches lost Deletes too; a watch open at
//     the end must deliver the run's last write within 30s.
//
// It cannot tell when a Delete committed (its event carries the resource's
// last Version), so a Delete that is lost on a stream that is not Settled
// goes unnoticed unless the resource is written again.
func (h *History) ValidateWatch(w *WatchRecord) []string {
	return validateWatch(w, h.acknowledged(), h.maybe(), h.Final)
}

func validateWatch(w *WatchRecord, acks map[string]map[string]State, maybe func(State) bool, final map[string]State) []string {
	var problems []string
	fail := func(format string, args ...any) {
		if len(problems) < 10 {
			problems = append(problems, fmt.Sprintf("watch %d: ", w.ID)+fmt.Sprintf(format, args...))
		}
	}
	events := w.Events()
	if strings.Contains(w.End, errNotSettled) {
		fail("%s", errNotSettled)
	}

	// Form, and the snapshot.
	view := make(map[string]State)
	seenUids := make(map[string]bool)
	var snapshotTop uint64
	deltaFrom := -1
	for i, ev := range events {
		if ev.Kind == EventEndOfSnapshot {
			if deltaFrom >= 0 {
				fail("a second EndOfSnapshot at event %d", i)
			} else {
				deltaFrom = i + 1
			}
			continue
		}
		if a, ok := acks[ev.Res.Name][ev.Res.Version]; (!ok || a != ev.Res) && !maybe(ev.Res) {
			fail("event %d delivers %s %s, which no acknowledged write returned", i, ev.Res.Name, ev.Res)
		}
		if deltaFrom >= 0 {
			continue
		}
		if ev.Kind != EventUpsert {
			fail("event %d: a Delete in the snapshot", i)
			continue
		}
		if _, dup := view[ev.Res.Name]; dup {
			fail("event %d: %s twice in the snapshot", i, ev.Res.Name)
		}
		view[ev.Res.Name] = ev.Res
		seenUids[ev.Res.Uid] = true
		snapshotTop = max(snapshotTop, versionNumber(ev.Res.Version))
	}
	if deltaFrom < 0 {
		if w.Settled {
			fail("no EndOfSnapshot")
		}
		return problems // the snapshot never completed: nothing more to check
	}
	for name, res := range view {
		v := versionNumber(res.Version)
		for av := range acks[name] {
			if n := versionNumber(av); n > v && n <= snapshotTop {
				fail("the snapshot holds %s at version %s, but version %s of it was written before version %d, also in the snapshot",
					name, res.Version, av, snapshotTop)
			}
		}
	}

	// Changes: order, uniqueness and the per-resource rules.
	delivered := make(map[uint64]bool)
	since := make(map[string]uint64) // per name, the Version from which every write must be delivered
	for name, res := range view {
		since[name] = versionNumber(res.Version)
	}
	var first, last uint64
	for i := deltaFrom; i < len(events); i++ {
		ev := events[i]
		r := ev.Res
		v := versionNumber(r.Version)
		switch ev.Kind {
		case EventUpsert:
			if v <= snapshotTop {
				fail("event %d: %s at version %s, not above the snapshot's %d", i, r.Name, r.Version, snapshotTop)
			}
			if v <= last {
				fail("event %d: %s at version %s after version %d: out of order or duplicated", i, r.Name, r.Version, last)
			}
			if first == 0 {
				first = v
			}
			last = max(last, v)
			delivered[v] = true
			if held, ok := view[r.Name]; ok {
				if held.Uid != r.Uid {
					fail("event %d: %s changes uid %s to %s without a Delete between", i, r.Name, held.Uid, r.Uid)
				}
			} else if seenUids[r.Uid] {
				fail("event %d: %s comes back with uid %s after its Delete", i, r.Name, r.Uid)
			}
			view[r.Name] = r
			seenUids[r.Uid] = true
			since[r.Name] = v
		case EventDelete:
			held, ok := view[r.Name]
			if !ok || held.Version != r.Version || held.Uid != r.Uid {
				fail("event %d: Delete of %s at version %s uid %s, but the watch holds %v (%v)", i, r.Name, r.Version, r.Uid, held, ok)
			}
			delete(view, r.Name)
		}
	}

	// No gap.
	for name, versions := range acks {
		for av := range versions {
			n := versionNumber(av)
			if delivered[n] || n > last {
				continue
			}
			if n >= first && first != 0 {
				fail("acknowledged write of %s at version %s is missing between versions %d and %d", name, av, first, last)
			} else if s, ok := since[name]; ok && n > s {
				fail("acknowledged write of %s at version %s is missing after version %d of it", name, av, s)
			}
		}
	}
	// since[] holds the last delivered Version per name, so the loop above
	// checks writes after the last one only; check between deliveries too.
	perName := make(map[string][]uint64)
	for i := deltaFrom; i < len(events); i++ {
		if ev := events[i]; ev.Kind == EventUpsert {
			perName[ev.Res.Name] = append(perName[ev.Res.Name], versionNumber(ev.Res.Version))
		}
	}
	for name, vs := range perName {
		lo := uint64(0)
		if res, ok := snapshotOf(events[:deltaFrom], name); ok {
			lo = versionNumber(res.Version)
		}
		for _, v := range vs {
			for av := range acks[name] {
				if n := versionNumber(av); lo != 0 && n > lo && n < v && !delivered[n] {
					fail("acknowledged write of %s at version %s is missing between its versions %d and %d", name, av, lo, v)
				}
			}
			lo = v
		}
	}

	if w.Settled {
		for name, res := range final {
			if got, ok := view[name]; !ok || got != res {
				fail("at the end, the watch holds %s as %v (%v), the store as %s", name, got, ok, res)
			}
		}
		for name, got := range view {
			if _, ok := final[name]; !ok {
				fail("at the end, the watch holds %s as %s, which the store no longer has", name, got)
			}
		}
	}
	return problems
}

// snapshotOf returns the resource named name in a snapshot.
func snapshotOf(snapshot []WatchEvent, name string) (State, bool) {
	for _, ev := range snapshot {
		if ev.Kind == EventUpsert && ev.Res.Name == name {
			return ev.Res, true
		}
	}
	return State{}, false
}
