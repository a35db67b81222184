package robustness

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// Hand-made histories the checks must accept or refuse, one rule each.

func st(version, gen, baz string) State {
	return State{Name: "r", Uid: "U1", Version: version, Generation: gen, Baz: baz}
}

func wr(call, ret int64, in Input, code codes.Code, res State) Op {
	in.Name = "r"
	return Op{Input: in, Output: Output{Code: code, Res: res}, Call: call, Return: ret}
}

func unknown(op Op) Op {
	op.Output.Unknown = true
	return op
}

func marked(version, gen, finalizers string) State {
	s := st(version, gen, "a")
	s.Finalizers, s.Deletion = finalizers, "T"
	return s
}

func TestModel(t *testing.T) {
	create := wr(0, 1, Input{Baz: "a"}, codes.OK, st("5", "G1", "a"))
	fcreate := wr(0, 1, Input{Baz: "a", Finalizers: "f1"}, codes.OK, func() State { s := st("5", "G1", "a"); s.Finalizers = "f1"; return s }())
	tests := []struct {
		name string
		ops  []Op
		ok   bool
	}{
		{"create, update, read", []Op{
			create,
			wr(2, 3, Input{Baz: "b", Version: "5"}, codes.OK, st("7", "G2", "b")),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, st("7", "G2", "b")),
		}, true},
		{"a no-op keeps version and generation", []Op{
			create,
			wr(2, 3, Input{Baz: "a"}, codes.OK, st("5", "G1", "a")),
		}, true},
		{"a no-op that bumps the version", []Op{
			create,
			wr(2, 3, Input{Baz: "a"}, codes.OK, st("6", "G1", "a")),
		}, false},
		{"an update that keeps the generation", []Op{
			create,
			wr(2, 3, Input{Baz: "b"}, codes.OK, st("6", "G1", "b")),
		}, false},
		{"a CAS write with a stale version that succeeds", []Op{
			create,
			wr(2, 3, Input{Baz: "b"}, codes.OK, st("6", "G2", "b")),
			wr(4, 5, Input{Baz: "c", Version: "5"}, codes.OK, st("8", "G3", "c")),
		}, false},
		{"a CAS write with a stale version is Aborted", []Op{
			create,
			wr(2, 3, Input{Baz: "b"}, codes.OK, st("6", "G2", "b")),
			wr(4, 5, Input{Baz: "c", Version: "5"}, codes.Aborted, State{}),
		}, true},
		{"a stale strong read", []Op{
			create,
			wr(2, 3, Input{Baz: "b"}, codes.OK, st("6", "G2", "b")),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, st("5", "G1", "a")),
		}, false},
		{"a strong read concurrent with a write may see either", []Op{
			create,
			wr(2, 5, Input{Baz: "b"}, codes.OK, st("6", "G2", "b")),
			wr(3, 4, Input{Kind: KindReadStrong}, codes.OK, st("5", "G1", "a")),
		}, true},
		{"a read of a deleted resource", []Op{
			create,
			wr(2, 3, Input{Kind: KindDelete}, codes.OK, State{}),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, st("5", "G1", "a")),
		}, false},
		{"a status write keeps the generation and sets the status", []Op{
			create,
			wr(2, 3, Input{Kind: KindWriteStatus, Uid: "U1", Status: "S"}, codes.OK, State{Name: "r", Uid: "U1", Version: "6", Generation: "G1", Baz: "a", Status: "S"}),
			wr(4, 5, Input{Baz: "b"}, codes.OK, State{Name: "r", Uid: "U1", Version: "7", Generation: "G2", Baz: "b", Status: "S"}),
		}, true},
		{"a write that drops the status", []Op{
			create,
			wr(2, 3, Input{Kind: KindWriteStatus, Uid: "U1", Status: "S"}, codes.OK, State{Name: "r", Uid: "U1", Version: "6", Generation: "G1", Baz: "a", Status: "S"}),
			wr(4, 5, Input{Baz: "b"}, codes.OK, st("7", "G2", "b")),
		}, false},
		{"a version that goes back after a delete", []Op{
			create,
			wr(2, 3, Input{Kind: KindDelete}, codes.OK, State{}),
			wr(4, 5, Input{Baz: "a"}, codes.OK, State{Name: "r", Uid: "U2", Version: "4", Generation: "G3", Baz: "a"}),
		}, false},
		{"a write with a wrong uid is FailedPrecondition", []Op{
			create,
			wr(2, 3, Input{Baz: "b", Uid: "U9"}, codes.FailedPrecondition, State{}),
		}, true},
		{"a write with a wrong uid that succeeds", []Op{
			create,
			wr(2, 3, Input{Baz: "b", Uid: "U9"}, codes.OK, st("6", "G2", "b")),
		}, false},
		{"a delete marks a resource with finalizers; removing the last finishes it", []Op{
			fcreate,
			wr(2, 3, Input{Kind: KindDelete}, codes.OK, State{}),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, marked("7", "G2", "f1")),
			wr(6, 7, Input{Baz: "a", Deletion: "T"}, codes.OK, marked("7", "G2", "")),
			wr(8, 9, Input{Kind: KindReadStrong}, codes.NotFound, State{}),
		}, true},
		{"two writes finish the same deletion", []Op{
			fcreate,
			wr(2, 3, Input{Kind: KindDelete}, codes.OK, State{}),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, marked("7", "G2", "f1")),
			wr(6, 9, Input{Baz: "a", Deletion: "T", Version: "7"}, codes.OK, marked("7", "G2", "")),
			wr(7, 8, Input{Baz: "a", Deletion: "T", Version: "7"}, codes.OK, marked("7", "G2", "")),
		}, false},
		{"of two writes that finish the same deletion, one loses the race", []Op{
			fcreate,
			wr(2, 3, Input{Kind: KindDelete}, codes.OK, State{}),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, marked("7", "G2", "f1")),
			wr(6, 9, Input{Baz: "a", Deletion: "T", Version: "7"}, codes.OK, marked("7", "G2", "")),
			wr(7, 8, Input{Baz: "a", Deletion: "T", Version: "7"}, codes.Aborted, State{}),
		}, true},
		{"a write with a stale version finishes a deletion finished concurrently", []Op{
			fcreate,
			wr(2, 3, Input{Kind: KindDelete}, codes.OK, State{}),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, marked("7", "G2", "f1")),
			wr(6, 7, Input{Kind: KindWriteStatus, Uid: "U1", Status: "S"}, codes.OK, func() State { s := marked("8", "G2", "f1"); s.Status = "S"; return s }()),
			wr(6, 10, Input{Baz: "a", Deletion: "T", Version: "7"}, codes.OK, marked("7", "G2", "")),
			wr(8, 9, Input{Baz: "a", Deletion: "T"}, codes.OK, func() State { s := marked("8", "G2", ""); s.Status = "S"; return s }()),
		}, false},
		{"a write finishes a deletion finished long ago", []Op{
			fcreate,
			wr(2, 3, Input{Kind: KindDelete}, codes.OK, State{}),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, marked("7", "G2", "f1")),
			wr(6, 7, Input{Baz: "a", Deletion: "T", Version: "7"}, codes.OK, marked("7", "G2", "")),
			wr(8, 9, Input{Baz: "a"}, codes.OK, st("9", "G3", "a")),
			wr(10, 11, Input{Baz: "a", Deletion: "T", Version: "7"}, codes.OK, marked("7", "G2", "")),
		}, false},
		{"a delete of a resource with finalizers that removes it", []Op{
			fcreate,
			wr(2, 3, Input{Kind: KindDelete}, codes.OK, State{}),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.NotFound, State{}),
		}, false},
		{"a marked resource whose data changes", []Op{
			fcreate,
			wr(2, 3, Input{Kind: KindDelete}, codes.OK, State{}),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, marked("7", "G2", "f1")),
			wr(6, 7, Input{Baz: "b", Finalizers: "f1", Deletion: "T"}, codes.OK, func() State { s := marked("8", "G3", "f1"); s.Baz = "b"; return s }()),
		}, false},
		{"a marked resource whose data change is refused", []Op{
			fcreate,
			wr(2, 3, Input{Kind: KindDelete}, codes.OK, State{}),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, marked("7", "G2", "f1")),
			wr(6, 7, Input{Baz: "b", Finalizers: "f1", Deletion: "T"}, codes.InvalidArgument, State{}),
		}, true},
		{"a write that sets deletionTimestamp", []Op{
			fcreate,
			wr(2, 3, Input{Baz: "a", Finalizers: "f1", Deletion: "T"}, codes.OK, func() State { s := marked("6", "G2", "f1"); return s }()),
		}, false},
		{"a write of unknown outcome that took effect", []Op{
			create,
			unknown(wr(2, 3, Input{Baz: "b"}, codes.Unavailable, State{})),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, st("7", "G2", "b")),
			wr(6, 7, Input{Baz: "b", Version: "7"}, codes.OK, st("7", "G2", "b")),
		}, true},
		{"a write of unknown outcome that took effect late", []Op{
			create,
			unknown(wr(2, 3, Input{Baz: "b"}, codes.Unavailable, State{})),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, st("5", "G1", "a")),
			wr(6, 7, Input{Kind: KindReadStrong}, codes.OK, st("7", "G2", "b")),
		}, true},
		{"a write of unknown outcome that did not", []Op{
			create,
			unknown(wr(2, 3, Input{Baz: "b"}, codes.Unavailable, State{})),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, st("5", "G1", "a")),
		}, true},
		{"a write of unknown outcome seen with other data", []Op{
			create,
			unknown(wr(2, 3, Input{Baz: "b"}, codes.Unavailable, State{})),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.OK, st("7", "G2", "c")),
		}, false},
		{"a delete of unknown outcome, then the resource comes back", []Op{
			create,
			unknown(wr(2, 3, Input{Kind: KindDelete}, codes.Unavailable, State{})),
			wr(4, 5, Input{Kind: KindReadStrong}, codes.NotFound, State{}),
			wr(6, 7, Input{Kind: KindReadStrong}, codes.OK, st("5", "G1", "a")),
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := &History{Ops: tt.ops}
			problems := h.linearizable(10 * time.Second)
			if (len(problems) == 0) != tt.ok {
				t.Fatalf("linearizable: want ok=%v, got %v", tt.ok, problems)
			}
		})
	}
}

func TestEventualChecks(t *testing.T) {
	create := wr(0, 1, Input{Baz: "a"}, codes.OK, st("5", "G1", "a"))
	update := wr(2, 3, Input{Baz: "b"}, codes.OK, st("6", "G2", "b"))
	read := func(call, ret int64, s State) Op {
		return wr(call, ret, Input{Kind: KindReadEventual}, codes.OK, s)
	}
	ok := &History{Ops: []Op{create, update, read(4, 5, st("5", "G1", "a")), read(6, 7, st("6", "G2", "b"))}}
	if p := ok.eventual(); len(p) > 0 {
		t.Fatalf("a stale but monotonic history refused: %v", p)
	}
	back := &History{Ops: []Op{create, update, read(4, 5, st("6", "G2", "b")), read(6, 7, st("5", "G1", "a"))}}
	if p := back.eventual(); len(p) == 0 || !strings.Contains(p[0], "not monotonic") {
		t.Fatalf("a read going back in time accepted: %v", p)
	}
	phantom := &History{Ops: []Op{create, read(4, 5, st("5", "G9", "z"))}}
	if p := phantom.eventual(); len(p) == 0 || !strings.Contains(p[0], "no acknowledged write") {
		t.Fatalf("a read of what no write returned accepted: %v", p)
	}
}

func TestValidateWatch(t *testing.T) {
	a5, a6, b7, a8 := st("5", "G1", "a"), st("6", "G2", "b"), State{Name: "s", Uid: "U3", Version: "7", Generation: "G5", Baz: "x"}, st("8", "G3", "c")
	acks := map[string]map[string]State{
		"r": {"5": a5, "6": a6, "8": a8},
		"s": {"7": b7},
	}
	up := func(s State) WatchEvent { return WatchEvent{Kind: EventUpsert, Res: s} }
	del := func(s State) WatchEvent { return WatchEvent{Kind: EventDelete, Res: s} }
	eos := WatchEvent{Kind: EventEndOfSnapshot}
	tests := []struct {
		name    string
		events  []WatchEvent
		settled bool
		final   map[string]State
		want    string // "" for no problem
	}{
		{"complete", []WatchEvent{up(a5), eos, up(a6), up(b7), up(a8)}, true, map[string]State{"r": a8, "s": b7}, ""},
		{"gap", []WatchEvent{up(a5), eos, up(b7), up(a8)}, false, nil, "missing"},
		{"duplicate", []WatchEvent{up(a5), eos, up(a6), up(a6)}, false, nil, "out of order or duplicated"},
		{"out of order", []WatchEvent{eos, up(b7), up(a6)}, false, nil, "out of order"},
		{"stale snapshot", []WatchEvent{up(a5), up(b7), eos}, false, nil, "snapshot holds r"},
		{"invented", []WatchEvent{eos, up(st("9", "G1", "a"))}, false, nil, "no acknowledged write"},
		{"delete of another version", []WatchEvent{up(a5), eos, up(a6), del(a5)}, false, nil, "Delete of r"},
		{"lost delete", []WatchEvent{up(a5), eos, up(a6), up(b7)}, true, map[string]State{"s": b7}, "no longer has"},
		{"two snapshots ends", []WatchEvent{eos, eos}, false, nil, "second EndOfSnapshot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := &WatchRecord{events: tt.events, Settled: tt.settled}
			problems := validateWatch(w, acks, func(State) bool { return false }, tt.final)
			if tt.want == "" {
				if len(problems) > 0 {
					t.Fatalf("refused: %v", problems)
				}
				return
			}
			if len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Fatalf("want a problem with %q, got %v", tt.want, problems)
			}
		})
	}
}
