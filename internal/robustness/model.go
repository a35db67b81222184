package robustness

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
	"google.golang.org/grpc/codes"
)

// register is the model's state of one resource name: what is stored, if
// anything, and the Version of the last write to the name, which every
// later write must exceed (Versions are a store-wide revision).
type register struct {
	Exists bool
	Res    State
	Last   uint64
}

// model is the ResourceService's contract for one resource name, for
// resources without finalizers or owners. It follows server/write.go,
// write_status.go and delete.go:
//
//   - Aborted answers a Version that is not the stored one (none is, on an
//     absent name), and FailedPrecondition a Uid that is not. When both are
//     wrong either may come: the service checks the Uid first, but a
//     backend CAS that loses a race reports both as Aborted.
//   - Write on an absent name: a Version gives Aborted, else a Uid gives
//     NotFound, else it creates (new Uid, Generation and a Version above
//     every earlier one, no status).
//   - Write on a stored resource: data and metadata equal to the stored ones are a no-op: the
//     stored resource is returned unchanged, Version and Generation
//     included. Otherwise the Uid and status are kept, and the Generation
//     and Version are new (the Version higher).
//   - WriteStatus: NotFound on an absent name (or Aborted, with a
//     Version), FailedPrecondition for another Uid, Aborted for another
//     Version; otherwise it sets the
//     status, with a new Version and the same Generation. It never is a
//     no-op (it stamps UpdatedAt).
//   - Delete: succeeds on an absent name; FailedPrecondition for another
//     Uid, Aborted for another Version; otherwise removes.
//   - Strong Read: NotFound on an absent name, else exactly the stored
//     resource.
var model = porcupine.Model{
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
	Init: func() interface{} { return register{} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		return step(state.(register), input.(Input), output.(Output))
	},
	DescribeOperation: func(input, output interface{}) string {
		return Op{Input: input.(Input), Output: output.(Output)}.String()
	},
	DescribeState: func(state interface{}) string {
		r := state.(register)
		if !r.Exists {
			return fmt.Sprintf("absent (last v=%d)", r.Last)
		}
		return r.Res.String()
	},
}

// step applies one operation to st, reporting whether its output is one
// the contract allows.
func step(st register, in Input, out Output) (bool, register) {
	cas := in.Version != ""
	uidOK := in.Uid == "" || in.Uid == st.Res.Uid
	versionOK := !cas || in.Version == st.Res.Version
	r := out.Res
	switch in.Kind {
	case KindWrite:
		if out.Code != codes.OK {
			switch out.Code {
			case codes.Aborted:
				return cas && (!st.Exists || !versionOK), st
			case codes.FailedPrecondition:
				return st.Exists && !uidOK, st
			case codes.NotFound:
				return !st.Exists && !cas && in.Uid != "", st
			}
			return false, st
		}
		if r.Baz != in.Baz || r.Label != in.Label || r.Name != in.Name {
			return false, st
		}
		if !st.Exists {
			ok := !cas && in.Uid == "" && r.Status == "" && r.Uid != "" && r.Generation != "" &&
				versionNumber(r.Version) > st.Last
			return ok, register{Exists: true, Res: r, Last: versionNumber(r.Version)}
		}
		if !uidOK || !versionOK {
			return false, st
		}
		if in.Baz == st.Res.Baz && in.Label == st.Res.Label {
			return r == st.Res, st // the no-op rule
		}
		ok := r.Uid == st.Res.Uid && r.Status == st.Res.Status && r.Generation != "" &&
			r.Generation != st.Res.Generation && versionNumber(r.Version) > st.Last
		return ok, register{Exists: true, Res: r, Last: versionNumber(r.Version)}

	case KindWriteStatus:
		uidOK = in.Uid == st.Res.Uid // WriteStatus requires a Uid
		if out.Code != codes.OK {
			switch out.Code {
			case codes.NotFound:
				return !st.Exists, st
			case codes.FailedPrecondition:
				return st.Exists && !uidOK, st
			case codes.Aborted:
				return cas && (!st.Exists || !versionOK), st
			}
			return false, st
		}
		ok := st.Exists && uidOK && versionOK && r.Name == in.Name && r.Uid == st.Res.Uid &&
			r.Generation == st.Res.Generation && r.Baz == st.Res.Baz && r.Label == st.Res.Label &&
			r.Status == in.Status && versionNumber(r.Version) > st.Last
		return ok, register{Exists: true, Res: r, Last: versionNumber(r.Version)}

	case KindDelete:
		if out.Code != codes.OK {
			switch out.Code {
			case codes.FailedPrecondition:
				return st.Exists && !uidOK, st
			case codes.Aborted:
				return cas && st.Exists && !versionOK, st
			}
			return false, st
		}
		if !st.Exists {
			return true, st
		}
		return uidOK && versionOK, register{Last: st.Last}

	case KindReadStrong:
		if out.Code == codes.NotFound {
			return !st.Exists, st
		}
		return out.Code == codes.OK && st.Exists && r == st.Res, st
	}
	return false, st
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
		}
		ops = append(ops, porcupine.Operation{
			ClientId: op.Client, Input: op.Input, Output: op.Output, Call: op.Call, Return: op.Return,
		})
	}
	var problems []string
	for _, part := range model.Partition(ops) {
		name := part[0].Input.(Input).Name
		res, info := porcupine.CheckOperationsVerbose(model, part, timeout)
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
