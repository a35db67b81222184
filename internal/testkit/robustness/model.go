package robustness

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc/codes"
)

// register is the model's state of one resource name: what is stored, if
// anything, and the Version of the last write to the name, which every
// later write must exceed (Versions are a store-wide revision).
//
// Unsure marks a resource written by an operation whose outcome is unknown
// (see Output.Unknown), or marked for deletion by a Delete (which returns
// nothing): its Version is unknown, and so are its Uid, Generation and
// deletionTimestamp when empty ("*" for the timestamp). The next operation
// that shows the resource makes it known again.
type register struct {
	Exists bool
	Unsure bool
	Res    State
	Last   uint64
}

// fits reports whether r, returned as the stored resource, is st's.
func (st register) fits(r State) bool {
	if !st.Unsure {
		return r == st.Res
	}
	return r.Name == st.Res.Name && r.Baz == st.Res.Baz && r.Label == st.Res.Label && r.Status == st.Res.Status &&
		r.Finalizers == st.Res.Finalizers && st.deletionMayBe(r.Deletion) &&
		(st.Res.Uid == "" || r.Uid == st.Res.Uid) && (st.Res.Generation == "" || r.Generation == st.Res.Generation) &&
		versionNumber(r.Version) > st.Last
}

// deletionMayBe reports whether the stored deletionTimestamp may be ts.
func (st register) deletionMayBe(ts string) bool {
	if st.Res.Deletion == "*" {
		return ts != ""
	}
	return ts == st.Res.Deletion
}

// deletionMayNotBe reports whether the stored deletionTimestamp may differ
// from ts.
func (st register) deletionMayNotBe(ts string) bool {
	if st.Res.Deletion == "*" {
		return true
	}
	return ts != st.Res.Deletion
}

// marked reports whether the stored resource is marked for deletion.
func (st register) marked() bool { return st.Res.Deletion != "" }

// finalizersAdded reports whether the finalizers list given adds one to
// the stored list (both space-separated).
func finalizersAdded(given, stored string) bool {
	have := make(map[string]bool)
	for _, f := range strings.Fields(stored) {
		have[f] = true
	}
	for _, f := range strings.Fields(given) {
		if !have[f] {
			return true
		}
	}
	return false
}

// known returns the state that holds r, as returned by a write or read.
func known(r State) register {
	return register{Exists: true, Res: r, Last: versionNumber(r.Version)}
}

// model is the ResourceService's contract for one resource name, for
// resources without owners. It follows server/write.go,
// write_status.go and delete.go:
//
//   - Aborted answers a Version that is not the stored one (none is, on an
//     absent name), and FailedPrecondition a Uid that is not. When both are
//     wrong either may come: the service checks the Uid first, but a
//     backend CAS that loses a race reports both as Aborted. A blanket
//     operation (no Version) may be Aborted too, changing nothing, when
//     its retries run out (server/retry.go); unexpectedErrors checks that
//     this is why.
//   - Write on an absent name: a Version gives Aborted, else a Uid gives
//     NotFound, else it creates (new Uid, Generation and a Version above
//     every earlier one, no status).
//   - Write on a stored resource: data and metadata equal to the stored
//     ones are a no-op: the stored resource is returned unchanged, Version
//     and Generation included. Otherwise the Uid and status are kept, and
//     the Generation and Version are new (the Version higher).
//   - WriteStatus: NotFound on an absent name (or Aborted, with a
//     Version), FailedPrecondition for another Uid, Aborted for another
//     Version; otherwise it sets the status, with a new Version and the
//     same Generation. It never is a no-op (it stamps UpdatedAt).
//   - Delete: succeeds on an absent name; FailedPrecondition for another
//     Uid, Aborted for another Version; otherwise removes, or, when the
//     resource has finalizers, marks it for deletion (deletionTimestamp,
//     new Generation and Version) unless it is marked already.
//   - Finalizers: a Write may set them when it creates or updates; no
//     Write may set, change or drop deletionTimestamp (InvalidArgument).
//     On a marked resource a Write may only remove finalizers
//     (InvalidArgument otherwise, unless it changes nothing); removing the
//     last one finishes the deletion and returns the resource as last
//     stored, without finalizers. Of two Writes that finish the same
//     deletion concurrently, the second loses the race like any CAS: its
//     delete finds nothing (storage.MustExist).
//   - Strong Read: NotFound on an absent name, else exactly the stored
//     resource.
//   - An operation whose outcome is unknown either did nothing or did what
//     it would have done, at any moment after its call.
var model = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byName := make(map[string][]porcupine.Operation)
		var names []string
		for _, op := range history {
			name := op.Input.(Input).Name
			if _, ok := byName[name]; !ok {
				names = append(names, name)
			}
			byName[name] = append(byName[name], op)
		}
		sort.Strings(names)
		out := make([][]porcupine.Operation, 0, len(names))
		for _, n := range names {
			out = append(out, byName[n])
		}
		return out
	},
	Init: func() []interface{} { return []interface{}{register{}} },
	Step: func(state, input, output interface{}) []interface{} {
		st, in, out := state.(register), input.(Input), output.(Output)
		if out.Unknown {
			next := []interface{}{st}
			if applied, ok := apply(st, in); ok {
				next = append(next, applied)
			}
			return next
		}
		if ok, next := step(st, in, out); ok {
			return []interface{}{next}
		}
		return nil
	},
	DescribeOperation: func(input, output interface{}) string {
		return Op{Input: input.(Input), Output: output.(Output)}.String()
	},
	DescribeState: func(state interface{}) string {
		r := state.(register)
		if !r.Exists {
			return fmt.Sprintf("absent (last v=%d)", r.Last)
		}
		if r.Unsure {
			return "unsure " + r.Res.String()
		}
		return r.Res.String()
	},
}

// checks holds what an operation's Uid and Version may be, against a
// state whose Uid or Version may be unknown.
type checks struct {
	cas                     bool
	uidOK, uidWrong         bool // the given Uid may match; may not match
	versionOK, versionWrong bool
}

func checksOf(st register, in Input, uidRequired bool) checks {
	c := checks{cas: in.Version != ""}
	given := in.Uid != "" || uidRequired
	unknownUid := st.Res.Uid == ""
	c.uidOK = !given || unknownUid || in.Uid == st.Res.Uid
	c.uidWrong = given && (unknownUid || in.Uid != st.Res.Uid)
	c.versionOK = !c.cas || st.Unsure || in.Version == st.Res.Version
	c.versionWrong = c.cas && (st.Unsure || in.Version != st.Res.Version)
	return c
}

// step applies one operation with a known outcome to st, reporting
// whether its output is one the contract allows.
func step(st register, in Input, out Output) (bool, register) {
	c := checksOf(st, in, in.Kind == KindWriteStatus)
	r := out.Res
	switch in.Kind {
	case KindWrite:
		// What the service checks, in its order (server/write.go).
		noop := st.Exists && in.Baz == st.Res.Baz && in.Label == st.Res.Label && in.Finalizers == st.Res.Finalizers
		illegal := st.marked() && (in.Baz != st.Res.Baz || in.Label != st.Res.Label || finalizersAdded(in.Finalizers, st.Res.Finalizers))
		if out.Code != codes.OK {
			switch out.Code {
			case codes.Aborted:
				return !c.cas || !st.Exists || c.versionWrong, st
			case codes.FailedPrecondition:
				return st.Exists && c.uidWrong, st
			case codes.NotFound:
				return !st.Exists && !c.cas && in.Uid != "", st
			case codes.InvalidArgument:
				if !st.Exists {
					return !c.cas && in.Uid == "" && in.Deletion != "", st
				}
				return c.uidOK && c.versionOK && (st.deletionMayNotBe(in.Deletion) || (illegal && !noop)), st
			}
			return false, st
		}
		if r.Baz != in.Baz || r.Label != in.Label || r.Finalizers != in.Finalizers || r.Deletion != in.Deletion || r.Name != in.Name {
			return false, st
		}
		if !st.Exists {
			ok := !c.cas && in.Uid == "" && in.Deletion == "" && r.Status == "" && r.Uid != "" && r.Generation != "" &&
				versionNumber(r.Version) > st.Last
			return ok, known(r)
		}
		if !c.uidOK || !c.versionOK || !st.deletionMayBe(in.Deletion) {
			return false, st
		}
		if noop {
			return st.fits(r), known(r) // the no-op rule
		}
		if illegal {
			return false, st
		}
		if st.marked() && in.Finalizers == "" {
			// The last finalizer is gone: the deletion is finished, and the
			// resource is returned as last stored, without finalizers.
			was := st
			was.Res.Finalizers = ""
			was.Res.Deletion = in.Deletion
			return was.fits(r), register{Last: max(st.Last, versionNumber(r.Version))}
		}
		ok := (st.Res.Uid == "" || r.Uid == st.Res.Uid) && r.Status == st.Res.Status && r.Generation != "" &&
			r.Generation != st.Res.Generation && versionNumber(r.Version) > st.Last
		return ok, known(r)

	case KindWriteStatus:
		if out.Code != codes.OK {
			switch out.Code {
			case codes.NotFound:
				return !st.Exists, st
			case codes.FailedPrecondition:
				return st.Exists && c.uidWrong, st
			case codes.Aborted:
				return !c.cas || !st.Exists || c.versionWrong, st
			}
			return false, st
		}
		want := st.Res
		want.Status = in.Status
		want.Uid = in.Uid
		ok := st.Exists && c.uidOK && c.versionOK && r.Name == in.Name && r.Uid == in.Uid &&
			(want.Generation == "" || r.Generation == want.Generation) && r.Baz == want.Baz && r.Label == want.Label &&
			r.Status == in.Status && versionNumber(r.Version) > st.Last
		return ok, known(r)

	case KindDelete:
		if out.Code != codes.OK {
			switch out.Code {
			case codes.FailedPrecondition:
				return st.Exists && c.uidWrong, st
			case codes.Aborted:
				return !c.cas || (st.Exists && c.versionWrong), st
			}
			return false, st
		}
		if !st.Exists {
			return true, st
		}
		if !c.uidOK || !c.versionOK {
			return false, st
		}
		return true, deleted(st)

	case KindReadStrong:
		if out.Code == codes.NotFound {
			return !st.Exists, st
		}
		return out.Code == codes.OK && st.Exists && st.fits(r), known(r)
	}
	return false, st
}

// deleted returns the state after a Delete of the resource st holds: gone,
// or, if it has finalizers, marked for deletion (with a new Version and
// Generation, and a timestamp the history learns when it reads it).
func deleted(st register) register {
	if st.Res.Finalizers == "" {
		return register{Last: st.Last}
	}
	if st.marked() {
		return st // already waiting for its finalizers
	}
	res := st.Res
	res.Version, res.Generation, res.Deletion = "", "", "*"
	return register{Exists: true, Unsure: true, Last: st.Last, Res: res}
}

// apply returns the state after in, an operation whose outcome is unknown,
// took effect on st; false if it could not have changed anything.
func apply(st register, in Input) (register, bool) {
	c := checksOf(st, in, in.Kind == KindWriteStatus)
	switch in.Kind {
	case KindWrite:
		if !st.Exists {
			if c.cas || in.Uid != "" || in.Deletion != "" {
				return st, false
			}
			return register{Exists: true, Unsure: true, Last: st.Last,
				Res: State{Name: in.Name, Baz: in.Baz, Label: in.Label, Finalizers: in.Finalizers}}, true
		}
		noop := in.Baz == st.Res.Baz && in.Label == st.Res.Label && in.Finalizers == st.Res.Finalizers
		illegal := st.marked() && (in.Baz != st.Res.Baz || in.Label != st.Res.Label || finalizersAdded(in.Finalizers, st.Res.Finalizers))
		if !c.uidOK || !c.versionOK || !st.deletionMayBe(in.Deletion) || noop || illegal {
			return st, false
		}
		if st.marked() && in.Finalizers == "" {
			return register{Last: st.Last}, true
		}
		res := st.Res
		res.Version, res.Generation, res.Baz, res.Label, res.Finalizers = "", "", in.Baz, in.Label, in.Finalizers
		return register{Exists: true, Unsure: true, Last: st.Last, Res: res}, true
	case KindWriteStatus:
		if !st.Exists || !c.uidOK || !c.versionOK {
			return st, false
		}
		res := st.Res
		res.Version, res.Uid, res.Status = "", in.Uid, in.Status
		return register{Exists: true, Unsure: true, Last: st.Last, Res: res}, true
	case KindDelete:
		if !st.Exists || !c.uidOK || !c.versionOK {
			return st, false
		}
		return deleted(st), true
	}
	return st, false
}

// linearizable checks the writes and strong reads of h for
// linearizability, name by name, and describes each name that fails (or
// whose check timed out).
func (h *History) linearizable(timeout time.Duration) []string {
	var ops []porcupine.Operation
	for _, op := range h.Ops {
		switch op.Input.Kind {
		case KindReadEventual, KindList:
			continue
		case KindReadStrong:
			if op.Output.Unknown {
				continue // it failed and returned nothing
			}
		}
		ret := op.Return
		if op.Output.Unknown {
			ret = math.MaxInt64 // it may take effect at any moment after its call
		}
		ops = append(ops, porcupine.Operation{
			ClientId: op.Client, Input: op.Input, Output: op.Output, Call: op.Call, Return: ret,
		})
	}
	m := model.ToModel()
	var problems []string
	for _, part := range m.Partition(ops) {
		name := part[0].Input.(Input).Name
		res, info := porcupine.CheckOperationsVerbose(m, part, timeout)
		switch res {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			problems = append(problems, fmt.Sprintf("resource %q: porcupine timed out after %v on %d operations", name, timeout, len(part)))
			continue
		}
		problems = append(problems, fmt.Sprintf("resource %q: history is not linearizable (%d operations)\n%s", name, len(part), describeFailure(part, info)))
	}
	return problems
}

// describeFailure lists the end of the longest linearizable prefix of a
// failing partition and the first operations that could not follow it.
func describeFailure(part []porcupine.Operation, info porcupine.LinearizationInfo) string {
	var longest []int
	for _, p := range info.PartialLinearizations() {
		for _, lin := range p {
			if len(lin) > len(longest) {
				longest = lin
			}
		}
	}
	show := func(op porcupine.Operation) string {
		return Op{Client: op.ClientId, Input: op.Input.(Input), Output: op.Output.(Output), Call: op.Call, Return: op.Return}.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  longest linearizable prefix: %d operations, ending with:\n", len(longest))
	in := make(map[int]bool, len(longest))
	for i, id := range longest {
		in[id] = true
		if i >= len(longest)-8 {
			fmt.Fprintf(&b, "    %s\n", show(part[id]))
		}
	}
	var rest []porcupine.Operation
	for id, op := range part {
		if !in[id] {
			rest = append(rest, op)
		}
	}
	sort.Slice(rest, func(i, j int) bool { return rest[i].Call < rest[j].Call })
	fmt.Fprintf(&b, "  none of the next operations can follow it:\n")
	for _, op := range rest[:min(len(rest), 8)] {
		fmt.Fprintf(&b, "    %s\n", show(op))
	}
	return b.String()
}
