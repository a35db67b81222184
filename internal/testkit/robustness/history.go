package robustness

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Kind is the kind of a recorded operation.
type Kind int

// The kinds of operations the clients run.
const (
	KindWrite Kind = iota
	KindWriteStatus
	KindDelete
	KindReadStrong
	KindReadEventual
	KindList
)

var kindNames = [...]string{"Write", "WriteStatus", "Delete", "ReadStrong", "ReadEventual", "List"}

// String returns the kind's name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// writes reports whether k changes the store.
func (k Kind) writes() bool {
	return k == KindWrite || k == KindWriteStatus || k == KindDelete
}

// Input is what a client asked for.
type Input struct {
	Kind    Kind
	Name    string // the resource's name (empty for List)
	Version string // the Version sent, empty for none (blanket)
	Uid     string // the id.uid sent, empty for none
	Baz     string // Write: the data's baz
	Label   string // Write: the "label" metadata entry, empty for none
	// Write: the finalizers and deletionTimestamp metadata entries, empty
	// for none.
	Finalizers string
	Deletion   string
	Status     string // WriteStatus: the status's ObservedGeneration
}

// State is what the model and the checks compare of one stored resource.
type State struct {
	Name       string
	Uid        string
	Version    string
	Generation string
	Baz        string
	Label      string
	Finalizers string // the finalizers metadata entry
	// Deletion is the deletionTimestamp metadata entry: set by a Delete of
	// a resource with finalizers. In the model's state, "*" stands for a
	// timestamp not yet seen.
	Deletion string
	Status   string // ObservedGeneration of the status under StatusKey
}

// Output is what a client got back.
type Output struct {
	Code codes.Code // OK, or the error's code
	// Unknown means the operation failed with a code that leaves its
	// outcome open (Config.Indeterminate): a write may or may not have
	// taken effect; a read or List returned nothing and is left out of
	// the checks.
	Unknown bool
	Res     State   // the resource returned (Write, WriteStatus, Read)
	List    []State // List's resources
}

// Op is one recorded operation: invocation and response times are
// nanoseconds since the run started, on the monotonic clock.
type Op struct {
	Client int
	Server int // see Config.Connect
	Input  Input
	Output Output
	Call   int64
	Return int64
	Err    string // the error's message, for reports
}

// String describes the operation for failure reports.
func (o Op) String() string {
	in := o.Input
	s := fmt.Sprintf("c%d %s %s", o.Client, in.Kind, in.Name)
	if in.Version != "" {
		s += " v=" + in.Version
	}
	if in.Uid != "" {
		s += " uid=" + in.Uid
	}
	if in.Kind == KindWrite {
		s += fmt.Sprintf(" baz=%q label=%q", in.Baz, in.Label)
		if in.Finalizers != "" || in.Deletion != "" {
			s += fmt.Sprintf(" finalizers=%q deletion=%q", in.Finalizers, in.Deletion)
		}
	}
	if in.Kind == KindWriteStatus {
		s += fmt.Sprintf(" status=%q", in.Status)
	}
	s += fmt.Sprintf(" [%d,%d] -> %v", o.Call, o.Return, o.Output.Code)
	if o.Output.Unknown {
		s += " (outcome unknown)"
	}
	if o.Output.Code == codes.OK && in.Kind != KindDelete && in.Kind != KindList {
		s += " " + o.Output.Res.String()
	}
	return s
}

// String describes the state.
func (s State) String() string {
	out := fmt.Sprintf("{v=%s uid=%s gen=%s baz=%q label=%q status=%q", s.Version, s.Uid, s.Generation, s.Baz, s.Label, s.Status)
	if s.Finalizers != "" || s.Deletion != "" {
		out += fmt.Sprintf(" finalizers=%q deletion=%q", s.Finalizers, s.Deletion)
	}
	return out + "}"
}

// StatusKey is the status key WriteStatus operations write.
const StatusKey = "robustness"

// LabelKey is the metadata key of Input.Label.
const LabelKey = "label"

// stateOf returns what the checks compare of res. A resource whose data is
// neither a Bar nor a Zip gets the baz "<undecodable>", which no write
// makes; a Zip's zap is its baz.
func stateOf(res *pbresource.Resource) State {
	s := State{
		Name:       res.GetId().GetName(),
		Uid:        res.GetId().GetUid(),
		Version:    res.GetVersion(),
		Generation: res.GetGeneration(),
		Label:      res.GetMetadata()[LabelKey],
		Finalizers: res.GetMetadata()[resource.FinalizerKey],
		Deletion:   res.GetMetadata()[resource.DeletionTimestampKey],
		Status:     res.GetStatus()[StatusKey].GetObservedGeneration(),
	}
	var bar pbfoov1.Bar
	var zip pbfoov1.Zip
	switch {
	case res.GetData().UnmarshalTo(&bar) == nil:
		s.Baz = bar.Baz
	case res.GetData().UnmarshalTo(&zip) == nil:
		s.Baz = zip.Zap
	default:
		s.Baz = "<undecodable>"
	}
	return s
}

// versionNumber parses a Version, a decimal store-wide revision; anything
// else is 0, which no check accepts as newer.
func versionNumber(v string) uint64 {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// History is the record of one run.
type History struct {
	Seed    uint64
	Ops     []Op
	Watches []*WatchRecord
	// Final is the store at the end of the run (strong reads of every
	// name), once every client stopped.
	Final map[string]State

	mu    sync.Mutex
	start time.Time
}

func newHistory(seed uint64) *History {
	return &History{Seed: seed, start: time.Now()}
}

// now returns the nanoseconds since the run started.
func (h *History) now() int64 { return int64(time.Since(h.start)) }

func (h *History) add(op Op) {
	h.mu.Lock()
	h.Ops = append(h.Ops, op)
	h.mu.Unlock()
}

func (h *History) addWatch(w *WatchRecord) {
	h.mu.Lock()
	h.Watches = append(h.Watches, w)
	h.mu.Unlock()
}

// acknowledged returns every resource state a successful write or strong
// read returned (strong reads return what is stored: the linearizability
// check holds them to it), by name and Version.
func (h *History) acknowledged() map[string]map[string]State {
	acks := make(map[string]map[string]State)
	for _, op := range h.Ops {
		k := op.Input.Kind
		if op.Output.Code != codes.OK || (k != KindWrite && k != KindWriteStatus && k != KindReadStrong) {
			continue
		}
		r := op.Output.Res
		if r.Deletion != "" && r.Finalizers == "" {
			// A Write that removed the last finalizer: the resource is
			// gone, and r is not what is stored under its Version.
			continue
		}
		if acks[r.Name] == nil {
			acks[r.Name] = make(map[string]State)
		}
		acks[r.Name][r.Version] = r
	}
	return acks
}

// maybe returns a test of whether a resource may have been stored though
// no response returned it: by an operation of unknown outcome with its
// data and metadata (a Write) or its status (a WriteStatus), or by a
// Delete that marked it (which returns nothing). Such a resource's
// Version is not known to the history.
func (h *History) maybe() func(State) bool {
	unknown := make(map[string][]Input)
	for _, op := range h.Ops {
		if (op.Output.Unknown && op.Input.Kind.writes()) || (op.Input.Kind == KindDelete && op.Output.Code == codes.OK) {
			unknown[op.Input.Name] = append(unknown[op.Input.Name], op.Input)
		}
	}
	return func(s State) bool {
		for _, in := range unknown[s.Name] {
			switch in.Kind {
			case KindDelete:
				if s.Deletion != "" {
					return true
				}
			case KindWrite:
				if in.Baz == s.Baz && in.Label == s.Label && in.Finalizers == s.Finalizers {
					return true
				}
			case KindWriteStatus:
				if in.Status == s.Status && in.Uid == s.Uid {
					return true
				}
			}
		}
		return false
	}
}
