package acl

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/loomrt/loom/resource"
)

// fileSpec is the ACL file's layout.
type fileSpec struct {
	Tokens []tokenSpec `yaml:"tokens"`
}

type tokenSpec struct {
	Name   string     `yaml:"name"`
	Secret string     `yaml:"secret"`
	Rules  []ruleSpec `yaml:"rules"`
}

type ruleSpec struct {
	Type       string `yaml:"type"`
	Partition  string `yaml:"partition"`
	Namespace  string `yaml:"namespace"`
	Access     string `yaml:"access"`
	Capability string `yaml:"capability"` // instead of the four above
}

// capabilities are the values of a rule's capability.
var capabilities = map[string]resource.Capability{
	resource.CapabilityFence.String():      resource.CapabilityFence,
	resource.CapabilityReflection.String(): resource.CapabilityReflection,
	resource.CapabilityRestore.String():    resource.CapabilityRestore,
}

// Parse parses an ACL file's content; name (the file's path) starts every
// error, with the line at fault when there is one. Unknown fields, missing
// fields, malformed patterns, unknown access levels and repeated token
// names or secrets are errors: a file that does not say exactly what it
// means is refused, never half applied.
func Parse(name string, data []byte) (*Policy, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, yamlError(name, err)
	}
	var spec fileSpec
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&spec); err != nil {
		return nil, yamlError(name, err)
	}
	lines := ruleLines(&doc)
	p := &Policy{bySecret: make(map[[sha256.Size]byte]*token, len(spec.Tokens))}
	names := make(map[string]bool, len(spec.Tokens))
	for i, ts := range spec.Tokens {
		at := func(j int) string { // where token i (rule j, if j >= 0) is
			if l := lines.at(i, j); l > 0 {
				return fmt.Sprintf("%s:%d", name, l)
			}
			return name
		}
		what := fmt.Sprintf("token %d", i+1)
		if ts.Name != "" {
			what = fmt.Sprintf("token %s", resource.Quote(ts.Name))
		}
		switch {
		case ts.Name == "":
			return nil, fmt.Errorf("%s: %s has no name", at(-1), what)
		case names[ts.Name]:
			return nil, fmt.Errorf("%s: %s is named twice", at(-1), what)
		case ts.Secret == "":
			return nil, fmt.Errorf("%s: %s has no secret", at(-1), what)
		}
		names[ts.Name] = true
		h := sha256.Sum256([]byte(ts.Secret))
		if _, dup := p.bySecret[h]; dup {
			return nil, fmt.Errorf("%s: %s has the same secret as another token", at(-1), what)
		}
		t := &token{name: ts.Name, secretHash: h}
		for j, rs := range ts.Rules {
			var err error
			if rs.Capability != "" {
				err = t.addCapability(rs)
			} else {
				var r rule
				r, err = parseRule(rs)
				t.rules = append(t.rules, r)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %s, rule %d: %w", at(j), what, j+1, err)
			}
		}
		t.authz = Authorizer{t: t}
		p.bySecret[h] = t
	}
	return p, nil
}

// addCapability grants t the capability of rs, a rule that names one and
// nothing else.
func (t *token) addCapability(rs ruleSpec) error {
	if rs.Type != "" || rs.Partition != "" || rs.Namespace != "" || rs.Access != "" {
		return fmt.Errorf("a capability rule has no type, partition, namespace or access (give them in a rule of their own)")
	}
	c, ok := capabilities[rs.Capability]
	if !ok {
		return fmt.Errorf("capability %s is not %s, %s or %s", resource.Quote(rs.Capability), resource.CapabilityFence, resource.CapabilityReflection, resource.CapabilityRestore)
	}
	t.capabilities |= 1 << c
	return nil
}

func parseRule(rs ruleSpec) (rule, error) {
	var r rule
	parts := strings.Split(rs.Type, ".")
	if rs.Type == "" {
		return r, errors.New("type is required (a group.version.kind pattern, e.g. \"foo.*.Bar\"), or a capability (fence or reflection)")
	}
	if len(parts) != 3 {
		return r, fmt.Errorf("type %s is not a group.version.kind pattern (e.g. \"foo.*.Bar\")", resource.Quote(rs.Type))
	}
	for _, part := range parts {
		if part == "" {
			return r, fmt.Errorf("type %s has an empty part; use \"*\" to match any", resource.Quote(rs.Type))
		}
	}
	r.group, r.version, r.kind = parts[0], parts[1], parts[2]
	for _, u := range []struct {
		field, value string
		dst          *string
	}{{"partition", rs.Partition, &r.partition}, {"namespace", rs.Namespace, &r.namespace}} {
		if u.value == "" {
			return r, fmt.Errorf("%s is required (a name, or \"*\" for any)", u.field)
		}
		if u.value != wildcard {
			if err := resource.ValidateName(u.value); err != nil {
				return r, fmt.Errorf("%s %s: %w", u.field, resource.Quote(u.value), err)
			}
		}
		*u.dst = u.value
	}
	switch rs.Access {
	case "read":
		r.read = true
	case "list":
		r.list = true
	case "write":
		r.read, r.list, r.write = true, true, true
	case "":
		return r, errors.New("access is required (read, list or write)")
	default:
		return r, fmt.Errorf("access %s is not read, list or write", resource.Quote(rs.Access))
	}
	return r, nil
}

// yamlLine matches the "line N: what" of the YAML decoder's messages.
var yamlLine = regexp.MustCompile(`^line (\d+): (.*)$`)

// yamlError turns a YAML decoder error into "name:N: what" lines.
func yamlError(name string, err error) error {
	msgs := []string{strings.TrimPrefix(err.Error(), "yaml: ")}
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs = te.Errors
	}
	out := make([]string, len(msgs))
	for i, m := range msgs {
		m = strings.TrimSpace(m)
		if g := yamlLine.FindStringSubmatch(m); g != nil {
			out[i] = fmt.Sprintf("%s:%s: %s", name, g[1], strings.Split(g[2], " in type ")[0])
		} else {
			out[i] = fmt.Sprintf("%s: %s", name, m)
		}
	}
	return errors.New(strings.Join(out, "\n"))
}

// lineIndex records the line of each token and rule in the document.
type lineIndex struct {
	tokens []int
	rules  [][]int
}

// at returns the line of token i's rule j, or of token i when j < 0; 0 when
// unknown.
func (l lineIndex) at(i, j int) int {
	if i >= len(l.tokens) {
		return 0
	}
	if j < 0 || j >= len(l.rules[i]) {
		return l.tokens[i]
	}
	return l.rules[i][j]
}

func ruleLines(doc *yaml.Node) lineIndex {
	var idx lineIndex
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return idx
	}
	tokens := mapValue(doc.Content[0], "tokens")
	if tokens == nil || tokens.Kind != yaml.SequenceNode {
		return idx
	}
	for _, t := range tokens.Content {
		idx.tokens = append(idx.tokens, t.Line)
		var rl []int
		if rules := mapValue(t, "rules"); rules != nil && rules.Kind == yaml.SequenceNode {
			for _, r := range rules.Content {
				rl = append(rl, r.Line)
			}
		}
		idx.rules = append(idx.rules, rl)
	}
	return idx
}

// mapValue returns the value under key in mapping node m, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
