// Package selector parses and evaluates label selectors: Kubernetes selector
// syntax over a resource's metadata keys.
//
// A selector is a comma-separated list of requirements, all of which must
// hold (AND):
//
//	a=b  a==b      metadata key a is present with value b
//	a!=b           a is absent, or present with a value other than b
//	a in (x,y)     a is present with value x or y
//	a notin (x)    a is absent, or present with a value other than x
//	a              a is present (any value)
//	!a             a is absent
//
// Whitespace around keys, values and operators is ignored. A key or value is
// any run of characters other than whitespace and `=!(),`; a value may be
// empty in an (in)equality (`a=` matches a present with the empty value),
// not in a set. The metadata keys Loom
// reserves (resource.FinalizerKey and resource.DeletionTimestampKey) are not
// labels and cannot be selected on. The empty selector selects everything.
//
// Consul's servers ignore selectors, so a client that sends one must filter
// what it receives again with Matches.
package selector

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loomrt/loom/resource"
)

const (
	// MaxLength is the longest selector Parse accepts, in bytes.
	MaxLength = 4096

	// MaxRequirements is the most requirements a selector may hold; a
	// resource holds at most 64 metadata entries, so more would be redundant.
	MaxRequirements = 64
)

// Operator is how a requirement compares a metadata key's value.
type Operator uint8

// The operators of a requirement.
const (
	Equals       Operator = iota // key=value (or key==value)
	NotEquals                    // key!=value
	In                           // key in (values)
	NotIn                        // key notin (values)
	Exists                       // key
	DoesNotExist                 // !key
)

// Requirement is one condition of a selector over one metadata key.
type Requirement struct {
	// Key is the metadata key the requirement concerns.
	Key string
	// Op is how the key's value is compared.
	Op Operator
	// Values are the values compared against: one for Equals and
	// NotEquals, at least one (sorted, without duplicates) for In and
	// NotIn, none for Exists and DoesNotExist.
	Values []string
}

// Matches reports whether metadata satisfies the requirement.
func (r Requirement) Matches(metadata map[string]string) bool {
	v, ok := metadata[r.Key]
	switch r.Op {
	case Equals:
		return ok && v == r.Values[0]
	case NotEquals:
		return !ok || v != r.Values[0]
	case In:
		return ok && contains(r.Values, v)
	case NotIn:
		return !ok || !contains(r.Values, v)
	case Exists:
		return ok
	default: // DoesNotExist
		return !ok
	}
}

// contains reports whether the sorted values hold v, without allocating.
func contains(values []string, v string) bool {
	_, found := slices.BinarySearch(values, v)
	return found
}

// String renders the requirement in canonical form.
func (r Requirement) String() string {
	var b strings.Builder
	r.appendTo(&b)
	return b.String()
}

func (r Requirement) appendTo(b *strings.Builder) {
	switch r.Op {
	case Equals:
		b.WriteString(r.Key + "=" + r.Values[0])
	case NotEquals:
		b.WriteString(r.Key + "!=" + r.Values[0])
	case In, NotIn:
		b.WriteString(r.Key)
		if r.Op == In {
			b.WriteString(" in (")
		} else {
			b.WriteString(" notin (")
		}
		b.WriteString(strings.Join(r.Values, ","))
		b.WriteByte(')')
	case Exists:
		b.WriteString(r.Key)
	default:
		b.WriteString("!" + r.Key)
	}
}

// Selector is a parsed label selector: requirements that must all hold. The
// zero Selector selects everything. A Selector is immutable and safe for
// concurrent use.
type Selector struct {
	reqs []Requirement
}

// Everything returns the selector that matches every resource.
func Everything() Selector { return Selector{} }

// Empty reports whether s has no requirement, and so matches everything.
func (s Selector) Empty() bool { return len(s.reqs) == 0 }

// Requirements returns a copy of s's requirements, in canonical order (by
// key, then operator, then values).
func (s Selector) Requirements() []Requirement {
	out := make([]Requirement, len(s.reqs))
	for i, r := range s.reqs {
		r.Values = slices.Clone(r.Values)
		out[i] = r
	}
	return out
}

// Matches reports whether metadata satisfies every requirement of s. It
// allocates nothing.
func (s Selector) Matches(metadata map[string]string) bool {
	for _, r := range s.reqs {
		if !r.Matches(metadata) {
			return false
		}
	}
	return true
}

// String renders s in canonical form: requirements sorted by key, operator
// and values, `==` written `=`, set values sorted without duplicates. Parse of
// the result gives an equal selector; the empty selector renders as "".
func (s Selector) String() string {
	var b strings.Builder
	for i, r := range s.reqs {
		if i > 0 {
			b.WriteByte(',')
		}
		r.appendTo(&b)
	}
	return b.String()
}

// Parse parses a label selector written in Kubernetes syntax (see the
// package documentation). The empty (or all-whitespace) string is
// Everything. An error names the position and the problem, quoting at most
// resource.MaxQuoted bytes of the input.
func Parse(input string) (Selector, error) {
	if len(input) > MaxLength {
		return Selector{}, fmt.Errorf("label selector: %d bytes is longer than the maximum of %d", len(input), MaxLength)
	}
	p := parser{in: input}
	var reqs []Requirement
	p.skipSpace()
	if p.pos == len(p.in) {
		return Selector{}, nil
	}
	for {
		if len(reqs) == MaxRequirements {
			return Selector{}, fmt.Errorf("label selector: more than %d requirements", MaxRequirements)
		}
		r, err := p.requirement()
		if err != nil {
			return Selector{}, err
		}
		reqs = append(reqs, r)
		p.skipSpace()
		if p.pos == len(p.in) {
			break
		}
		if p.in[p.pos] != ',' {
			return Selector{}, p.errorf("expected ',' or the end")
		}
		p.pos++
	}
	slices.SortStableFunc(reqs, func(a, b Requirement) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		if a.Op != b.Op {
			return int(a.Op) - int(b.Op)
		}
		return slices.Compare(a.Values, b.Values)
	})
	return Selector{reqs: reqs}, nil
}

// MustParse is Parse for selectors known to be valid, such as constants: it
// panics on an error.
func MustParse(input string) Selector {
	s, err := Parse(input)
	if err != nil {
		panic(err)
	}
	return s
}

// isReserved reports whether key is a metadata key Loom reserves.
func isReserved(key string) bool {
	return key == resource.FinalizerKey || key == resource.DeletionTimestampKey
}
