package selector

import (
	"fmt"
	"slices"

	"github.com/loomrt/loom/resource"
)

// parser reads one selector; pos is the byte offset of the next unread byte.
type parser struct {
	in  string
	pos int
}

// errorf reports a problem at the current position, quoting a bounded part
// of what follows it.
func (p *parser) errorf(format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if p.pos >= len(p.in) {
		return fmt.Errorf("label selector: at position %d: %s, found the end", p.pos, what)
	}
	return fmt.Errorf("label selector: at position %d: %s, found %s", p.pos, what, resource.Quote(p.in[p.pos:]))
}

func (p *parser) skipSpace() {
	for p.pos < len(p.in) && isSpace(p.in[p.pos]) {
		p.pos++
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// isSpecial reports whether c ends a key or value.
func isSpecial(c byte) bool {
	switch c {
	case '=', '!', '(', ')', ',':
		return true
	}
	return isSpace(c)
}

// word reads a (possibly empty) key or value.
func (p *parser) word() string {
	start := p.pos
	for p.pos < len(p.in) && !isSpecial(p.in[p.pos]) {
		p.pos++
	}
	return p.in[start:p.pos]
}

// key reads a key, which must be present and not reserved.
func (p *parser) key() (string, error) {
	p.skipSpace()
	start := p.pos
	k := p.word()
	if k == "" {
		return "", p.errorf("expected a key")
	}
	if isReserved(k) {
		p.pos = start
		return "", fmt.Errorf("label selector: at position %d: %q is a reserved metadata key, not a label", start, k)
	}
	return k, nil
}

// requirement reads one requirement.
func (p *parser) requirement() (Requirement, error) {
	p.skipSpace()
	if p.pos < len(p.in) && p.in[p.pos] == '!' {
		p.pos++
		k, err := p.key()
		return Requirement{Key: k, Op: DoesNotExist}, err
	}
	k, err := p.key()
	if err != nil {
		return Requirement{}, err
	}
	p.skipSpace()
	if p.pos == len(p.in) || p.in[p.pos] == ',' {
		return Requirement{Key: k, Op: Exists}, nil
	}
	switch {
	case p.consume("!="):
		return p.single(k, NotEquals)
	case p.consume("=="), p.consume("="):
		return p.single(k, Equals)
	}
	start := p.pos
	switch p.word() {
	case "in":
		return p.set(k, In)
	case "notin":
		return p.set(k, NotIn)
	}
	p.pos = start
	return Requirement{}, p.errorf("expected an operator (=, ==, !=, in, notin), ',' or the end after key %s", resource.Quote(k))
}

// consume advances past tok if the input continues with it.
func (p *parser) consume(tok string) bool {
	if len(p.in)-p.pos >= len(tok) && p.in[p.pos:p.pos+len(tok)] == tok {
		p.pos += len(tok)
		return true
	}
	return false
}

// single reads the value of an (in)equality.
func (p *parser) single(k string, op Operator) (Requirement, error) {
	p.skipSpace()
	v := p.word()
	if p.pos < len(p.in) && (p.in[p.pos] == '!' || p.in[p.pos] == '=' || p.in[p.pos] == '(' || p.in[p.pos] == ')') {
		return Requirement{}, p.errorf("expected a value")
	}
	return Requirement{Key: k, Op: op, Values: []string{v}}, nil
}

// set reads the parenthesised values of in or notin: at least one, none
// of them empty.
func (p *parser) set(k string, op Operator) (Requirement, error) {
	p.skipSpace()
	if !p.consume("(") {
		return Requirement{}, p.errorf("expected '('")
	}
	var values []string
	for {
		p.skipSpace()
		v := p.word()
		if v == "" {
			return Requirement{}, p.errorf("expected a value")
		}
		values = append(values, v)
		p.skipSpace()
		if p.consume(")") {
			break
		}
		if !p.consume(",") {
			return Requirement{}, p.errorf("expected ',' or ')'")
		}
	}
	slices.Sort(values)
	return Requirement{Key: k, Op: op, Values: slices.Compact(values)}, nil
}
