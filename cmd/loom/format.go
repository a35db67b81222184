package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/oklog/ulid/v2"
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/condition"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Output formats of -o.
const (
	formatTable = "table"
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatName  = "name"
)

func checkFormat(format string, allowed ...string) error {
	for _, a := range allowed {
		if format == a {
			return nil
		}
	}
	return usagef("-o %s: want one of %s", format, strings.Join(allowed, ", "))
}

// printer writes resources in one output format. Data whose message type
// cannot be resolved is printed as its type URL and base64 bytes (with a
// warning on stderr, once per type) rather than failing the command.
type printer struct {
	format string
	types  *typeResolver
	stdout io.Writer
	stderr io.Writer
	now    func() time.Time
	warned map[string]bool
}

func (s *session) printer(format string, stdout io.Writer) *printer {
	return &printer{format: format, types: s.types, stdout: stdout, stderr: s.stderr, now: time.Now, warned: map[string]bool{}}
}

// resourceJSON renders res as JSON in protojson's field order, its data
// through the type resolver.
func (p *printer) resourceJSON(res *pbresource.Resource) ([]byte, error) {
	// Everything but the data, sharing res's fields: protojson only reads.
	rest := &pbresource.Resource{Id: res.Id, Owner: res.Owner, Version: res.Version, Generation: res.Generation,
		Metadata: res.Metadata, Status: res.Status}
	b, err := protojson.Marshal(rest)
	if err != nil {
		return nil, err
	}
	if res.GetData() == nil {
		return b, nil
	}
	data, err := p.anyJSON(res.GetData())
	if err != nil {
		return nil, err
	}
	return withField(b, "data", data)
}

// withField returns the JSON object obj with the field key: value added
// last, compacted.
func withField(obj []byte, key string, value []byte) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Compact(&out, obj); err != nil {
		return nil, err
	}
	out.Truncate(out.Len() - 1) // the closing brace
	if out.Len() > 1 {
		out.WriteByte(',')
	}
	out.WriteString(`"` + key + `":`)
	out.Write(value)
	out.WriteByte('}')
	return out.Bytes(), nil
}

// anyJSON renders a as protojson does when its type resolves, else as
// {"@type": URL, "@value": base64 bytes}.
func (p *printer) anyJSON(a *anypb.Any) ([]byte, error) {
	_, err := p.types.FindMessageByURL(a.GetTypeUrl())
	if err == nil {
		var b []byte
		if b, err = (protojson.MarshalOptions{Resolver: p.types}).Marshal(a); err == nil {
			return b, nil
		}
		// Bytes that do not decode as the type the server describes.
	}
	if !p.warned[a.GetTypeUrl()] {
		p.warned[a.GetTypeUrl()] = true
		fmt.Fprintf(p.stderr, "loom: warning: data printed as base64: %v\n", err)
	}
	return json.Marshal(map[string]string{"@type": a.GetTypeUrl(), "@value": base64.StdEncoding.EncodeToString(a.GetValue())})
}

// tidyJSON re-indents protojson's output, which varies its whitespace on
// purpose, so the CLI's output is stable.
func tidyJSON(b []byte, compact bool) ([]byte, error) {
	var out bytes.Buffer
	var err error
	if compact {
		err = json.Compact(&out, b)
	} else {
		err = json.Indent(&out, b, "", "  ")
	}
	return out.Bytes(), err
}

// jsonToYAML turns JSON into block-style YAML, keeping the key order.
func jsonToYAML(b []byte) ([]byte, error) {
	n, err := yamlNode(b)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := encodeYAML(&out, n); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func encodeYAML(w io.Writer, n *yaml.Node) error {
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return err
	}
	return enc.Close()
}

// yamlNode turns one JSON value into a YAML node tree, keeping the key
// order. Styles are left plain: the encoder quotes whatever would
// otherwise read back differently (a string "true", say).
func yamlNode(b []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return yamlValue(dec)
}

func yamlValue(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		if t == '[' {
			n.Kind, n.Tag = yaml.SequenceNode, "!!seq"
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				key, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key.(string)})
			}
			v, err := yamlValue(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return nil, err
		}
		if len(n.Content) == 0 {
			n.Style = yaml.FlowStyle // {} and [], rather than nothing
		}
		return n, nil
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(t.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(t)}, nil
	default: // null
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
}

// printResources prints a list (or one resource, when single) of resources.
func (p *printer) printResources(list []*pbresource.Resource, single bool) error {
	switch p.format {
	case formatName:
		for _, r := range list {
			fmt.Fprintln(p.stdout, resource.ReferenceString(r.GetId()))
		}
		return nil
	case formatTable:
		if len(list) == 0 {
			fmt.Fprintln(p.stderr, "No resources found.")
			return nil
		}
		w := tabwriter.NewWriter(p.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NAME\tTENANCY\tAGE\tVERSION\tSTATUS")
		for _, r := range list {
			fmt.Fprintln(w, p.row(r))
		}
		return w.Flush()
	}
	var docs [][]byte
	for _, r := range list {
		b, err := p.resourceJSON(r)
		if err != nil {
			return err
		}
		docs = append(docs, b)
	}
	return p.printDocs(docs, single)
}

// printDocs prints JSON documents in the printer's format (json or yaml):
// one document as itself when single, else a list.
func (p *printer) printDocs(docs [][]byte, single bool) error {
	if single && len(docs) == 1 {
		return p.writeDoc(docs[0], false)
	}
	// A list is a JSON array ("[]" when empty), and in YAML a sequence:
	// either reads back with apply -f.
	if p.format == formatYAML && len(docs) > 0 {
		return p.writeYAMLList(docs)
	}
	b := append([]byte{'['}, bytes.Join(docs, []byte{','})...)
	return p.writeDoc(append(b, ']'), false)
}

// writeYAMLList writes docs as a YAML sequence.
func (p *printer) writeYAMLList(docs [][]byte) error {
	// Each item is encoded as a sequence of one, and the items written one
	// after the other: yaml.v3's encoder slows down on large documents.
	w := bufio.NewWriter(p.stdout)
	for _, d := range docs {
		n, err := yamlNode(d)
		if err != nil {
			return err
		}
		if err := encodeYAML(w, &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{n}}); err != nil {
			return err
		}
	}
	return w.Flush()
}

// writeDoc writes one JSON document in the printer's format (json or yaml).
func (p *printer) writeDoc(b []byte, compact bool) error {
	var err error
	if p.format == formatYAML {
		b, err = jsonToYAML(b)
	} else {
		b, err = tidyJSON(b, compact)
		b = append(b, '\n')
	}
	if err != nil {
		return err
	}
	_, err = p.stdout.Write(b)
	return err
}

// row is a resource's line of a table: name, tenancy, age, version and a
// summary of its statuses.
func (p *printer) row(r *pbresource.Resource) string {
	return strings.Join([]string{r.GetId().GetName(), tenancyColumn(r.GetId().GetTenancy()), p.age(r), r.GetVersion(), statusSummary(r)}, "\t")
}

// tenancyColumn is a tenancy in a table: "partition.namespace" as
// elsewhere; a partition-scoped resource's partition alone, a
// cluster-scoped one's "-".
func tenancyColumn(t *pbresource.Tenancy) string {
	switch {
	case t.GetNamespace() == "" && t.GetPartition() == "":
		return "-"
	case t.GetNamespace() == "":
		return t.GetPartition()
	}
	return resource.TenancyString(t)
}

// age is how long ago the resource was created: its Uid is a ULID made then.
func (p *printer) age(r *pbresource.Resource) string {
	u, err := ulid.ParseStrict(r.GetId().GetUid())
	if err != nil {
		return "-"
	}
	return humanDuration(p.now().Sub(ulid.Time(u.Time())))
}

// humanDuration renders d as kubectl does: 45s, 3m12s, 5h3m, 12d.
func humanDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// statusSummary is each status key's conditions, e.g.
// "consul.io/x: Accepted=True,Ready=False", with "(stale)" when the status
// describes an older generation; "-" when there is none. A resource marked
// for deletion says so first.
func statusSummary(r *pbresource.Resource) string {
	var parts []string
	if _, ok := r.GetMetadata()[resource.DeletionTimestampKey]; ok {
		parts = append(parts, "Deleting")
	}
	keys := make([]string, 0, len(r.GetStatus()))
	for k := range r.GetStatus() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		st := r.GetStatus()[k]
		var conds []string
		for _, c := range st.GetConditions() {
			conds = append(conds, c.GetType()+"="+condition.StateName(c.GetState()))
		}
		s := k + ": " + strings.Join(conds, ",")
		if len(conds) == 0 {
			s = k + ": -"
		}
		if st.GetObservedGeneration() != r.GetGeneration() {
			s += " (stale)"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, "; ")
}
