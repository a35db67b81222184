package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// document is one resource read from a file, with where it came from.
type document struct {
	source string // "file.yaml: document 2"
	res    *pbresource.Resource
	// setMeta lists the metadata keys the document set itself, so apply
	// knows which ones to carry over from the stored resource.
	setMeta map[string]bool
}

// fileExts are the extensions of the files read from a directory.
var fileExts = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// readDocuments reads the resources of every -f argument: a file, a
// directory (its .yaml, .yml and .json files, not recursively, in name
// order) or "-" (standard input). It parses them all, and fails naming the
// file and document of the first problem. It reads no more than lim
// allows: a file larger than what is left of lim.input is refused from its
// size, before it is read, and every input is decoded one document at a
// time, so one too large for the server is refused before it is read whole.
func readDocuments(paths []string, stdin io.Reader, types *typeResolver, lim inputLimits) ([]document, error) {
	var docs []document
	left := lim.input
	for _, path := range paths {
		files, err := inputFiles(path)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			more, err := readFile(f, stdin, types, lim, &left)
			if err != nil {
				return nil, err
			}
			docs = append(docs, more...)
		}
	}
	if len(docs) == 0 {
		return nil, errors.New("no resources in the given files")
	}
	return docs, nil
}

// inputFiles returns the files of one -f argument.
func inputFiles(path string) ([]string, error) {
	if path == "-" {
		return []string{path}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && fileExts[strings.ToLower(filepath.Ext(e.Name()))] {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no .yaml, .yml or .json files", path)
	}
	return files, nil
}

// readFile parses one file ("-": stdin), taking what it reads from *left.
func readFile(f string, stdin io.Reader, types *typeResolver, lim inputLimits, left *int64) ([]document, error) {
	if f == "-" {
		return decodeDocuments("<stdin>", stdin, types, lim, left)
	}
	file, err := os.Open(f)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	if info, err := file.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > *left {
		return nil, lim.inputError(f)
	}
	return decodeDocuments(f, file, types, lim, left)
}

// decodeDocuments parses the YAML (or JSON, which is YAML) documents read
// from r, one at a time, taking what it reads from *left. Each document is
// a resource, a WriteRequest ({"resource": ...}), or a list of resources
// (what `loom list -o json|yaml` prints).
func decodeDocuments(name string, r io.Reader, types *typeResolver, lim inputLimits, left *int64) ([]document, error) {
	in := &inputReader{r: r, left: left, docLimit: lim.documentBytes()}
	dec := yaml.NewDecoder(in)
	var docs []document
	for i := 1; ; i++ {
		where := fmt.Sprintf("%s: document %d", name, i)
		in.docRead = 0
		var v any
		err := dec.Decode(&v)
		switch {
		case in.over == overInput:
			return nil, lim.inputError(name)
		case in.over == overDocument:
			return nil, lim.documentError(where)
		case errors.Is(err, io.EOF):
			return docs, nil
		case err != nil:
			return nil, fmt.Errorf("%s: %w", where, err)
		case v == nil:
			continue // an empty document, e.g. after a trailing "---"
		}
		items, isList := v.([]any)
		if !isList {
			items = []any{v}
		}
		for j, item := range items {
			src := where
			if isList {
				src = fmt.Sprintf("%s, item %d", where, j+1)
			}
			d, err := parseResource(item, types)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", src, err)
			}
			if size := proto.Size(d.res); size > lim.resource {
				return nil, lim.resourceError(src, size)
			}
			d.source = src
			docs = append(docs, d)
		}
	}
}

// parseResource turns one decoded document into a resource. As a
// convenience, id.type and owner.type may be written "group.version.kind".
func parseResource(v any, types *typeResolver) (document, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return document{}, fmt.Errorf("want a resource (a mapping with id and data), got %T", v)
	}
	if inner, ok := m["resource"].(map[string]any); ok && len(m) == 1 {
		m = inner // a WriteRequest
	}
	for _, key := range []string{"id", "owner"} {
		if err := expandType(m, key); err != nil {
			return document{}, err
		}
	}
	if data, ok := m["data"].(map[string]any); ok {
		if _, ok := data["@type"]; !ok {
			// The resource type does not name its message (the server's
			// registration does, and no RPC tells it): the file must.
			return document{}, errors.New(`data: missing "@type": name the data's protobuf message, ` +
				`e.g. '@type': type.googleapis.com/my.pkg.v1.Widget, the message the server registered for ` +
				`the resource type (an existing resource's 'loom read ... -o yaml' shows it)`)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return document{}, err
	}
	res := new(pbresource.Resource)
	if err := (protojson.UnmarshalOptions{Resolver: types}).Unmarshal(b, res); err != nil {
		return document{}, err
	}
	if res.GetId().GetType() == nil || res.GetId().GetName() == "" {
		return document{}, errors.New("id.type and id.name are required")
	}
	if err := resource.ValidateType(res.Id.Type); err != nil {
		return document{}, fmt.Errorf("id.type: %w", err)
	}
	if res.GetData() == nil {
		return document{}, errors.New("data is required")
	}
	d := document{res: res, setMeta: map[string]bool{}}
	for k := range res.GetMetadata() {
		d.setMeta[k] = true
	}
	return d, nil
}

func expandType(m map[string]any, key string) error {
	id, ok := m[key].(map[string]any)
	if !ok {
		return nil
	}
	s, ok := id["type"].(string)
	if !ok {
		return nil
	}
	t, err := resource.ParseType(s)
	if err != nil {
		return fmt.Errorf("%s.type: %w", key, err)
	}
	id["type"] = map[string]any{"group": t.Group, "groupVersion": t.GroupVersion, "kind": t.Kind}
	return nil
}
