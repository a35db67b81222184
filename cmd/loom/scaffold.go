package main

import (
	"bytes"
	"embed"
	"fmt"
	"go/format"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
	"unicode"
)

// scaffoldFS holds the templates of `loom init` and `loom create type`.
//
//go:embed scaffold/*.tmpl
var scaffoldFS embed.FS

var scaffoldTemplates = template.Must(template.New("").ParseFS(scaffoldFS, "scaffold/*.tmpl"))

// scaffold is what the templates are filled with: one module, its group,
// and the kind being written.
type scaffold struct {
	Module string // the Go module path
	Name   string // the host's command name: the module path's last element
	Group  string // the resource group, also the Go package of the types
	Remote bool   // whether the module has a separate controller process

	Kind      string // the resource kind, UpperCamelCase
	LowerKind string // the kind in words, for comments and log lines: "order item"
	FileKind  string // the kind in file names: "order_item"
	KebabKind string // the kind in controller names, status keys and finalizers: "order-item"
	Var       string // a Go variable holding one resource of the kind
}

// Pkg is the Go package (and directory) of the group's types.
func (s scaffold) Pkg() string { return s.Group }

// PbDir is the directory of the group's .proto files and their Go package.
func (s scaffold) PbDir() string { return "proto/pb" + s.Group + "/v1" }

// PbPkg is the Go package name of the group's generated code.
func (s scaffold) PbPkg() string { return "pb" + s.Group + "v1" }

// ProtoPackage is the protobuf package of the group's messages.
func (s scaffold) ProtoPackage() string { return s.Group + ".v1" }

var (
	kindRE  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	groupRE = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
)

// reservedGroups are package names the generated files import, and so
// cannot be the group's.
var reservedGroups = map[string]bool{
	"host": true, "remote": true, "resource": true, "controller": true, "condition": true, "finalizer": true,
	"reconcile": true, "upsert": true, "resourcetest": true, "pbresource": true, "grpc": true, "status": true,
	"codes": true, "insecure": true, "anypb": true, "main": true, "proto": true, "cmd": true, "examples": true,
}

// reservedVars are names the templates use that a kind's variable must not
// shadow.
var reservedVars = map[string]bool{
	"record": true, "res": true, "st": true, "err": true, "rt": true, "ctx": true, "client": true,
	"svc": true, "ready": true, "data": true, "conn": true, "recordID": true,
}

// withKind returns s set up for kind, or a usage error naming what is
// wrong with it.
func (s scaffold) withKind(kind string) (scaffold, error) {
	if !kindRE.MatchString(kind) {
		return s, usagef("-kind %q: a kind is UpperCamelCase letters and digits, such as Order or OrderItem", kind)
	}
	words := splitCamel(kind)
	s.Kind = kind
	s.LowerKind = strings.ToLower(strings.Join(words, " "))
	s.FileKind = strings.ToLower(strings.Join(words, "_"))
	s.KebabKind = strings.ToLower(strings.Join(words, "-"))
	s.Var = strings.ToLower(words[0]) + strings.Join(words[1:], "")
	if isGoKeyword(s.Var) || reservedVars[s.Var] || reservedGroups[s.Var] || s.Var == s.Group {
		s.Var += "Res"
	}
	return s, nil
}

func checkGroup(group string) error {
	if !groupRE.MatchString(group) || reservedGroups[group] {
		return usagef("-group %q: a group is lower-case letters and digits, starting with a letter, and not the name of a package the generated code imports (such as host or resource)", group)
	}
	return nil
}

// splitCamel splits "OrderItem" into "Order" and "Item" (a run of capitals
// stays a word: "HTTPRoute" is "HTTP" and "Route").
func splitCamel(s string) []string {
	r := []rune(s)
	var words []string
	start := 0
	for i := 1; i < len(r); i++ {
		upper := unicode.IsUpper(r[i])
		if upper && (!unicode.IsUpper(r[i-1]) || i+1 < len(r) && unicode.IsLower(r[i+1])) {
			words = append(words, string(r[start:i]))
			start = i
		}
	}
	return append(words, string(r[start:]))
}

func isGoKeyword(s string) bool {
	switch s {
	case "break", "case", "chan", "const", "continue", "default", "defer", "else", "fallthrough", "for", "func",
		"go", "goto", "if", "import", "interface", "map", "package", "range", "return", "select", "struct", "switch", "type", "var":
		return true
	}
	return false
}

// kindFiles are the files of one kind: template, and path in the module.
func (s scaffold) kindFiles() map[string]string {
	return map[string]string{
		"kind.proto.tmpl":         path.Join(s.PbDir(), s.FileKind+".proto"),
		"kind.go.tmpl":            path.Join(s.Pkg(), s.FileKind+".go"),
		"kind_controller.go.tmpl": path.Join(s.Pkg(), s.FileKind+"_controller.go"),
		"kind_test.go.tmpl":       path.Join(s.Pkg(), s.FileKind+"_test.go"),
		"kind.yaml.tmpl":          path.Join("examples", s.FileKind+".yaml"),
	}
}

// moduleFiles are the files `loom init` writes once per module.
func (s scaffold) moduleFiles() map[string]string {
	files := map[string]string{
		"group.go.tmpl":     path.Join(s.Pkg(), "group.go"),
		"main.go.tmpl":      "main.go",
		"main_test.go.tmpl": "main_test.go",
		"Makefile.tmpl":     "Makefile",
		"README.md.tmpl":    "README.md",
	}
	if s.Remote {
		files["remote_main.go.tmpl"] = path.Join("cmd", s.Name+"-controller", "main.go")
	}
	return files
}

// render fills each template of files and writes it under dir, Go files
// gofmt'd. It refuses to replace a file that exists.
func (s scaffold) render(dir string, files map[string]string) ([]string, error) {
	var written []string
	for tmpl, rel := range files {
		var buf bytes.Buffer
		if err := scaffoldTemplates.ExecuteTemplate(&buf, tmpl, s); err != nil {
			return written, err
		}
		out := buf.Bytes()
		if strings.HasSuffix(rel, ".go") {
			formatted, err := format.Source(out)
			if err != nil {
				return written, fmt.Errorf("formatting %s: %v", rel, err) // a template's fault
			}
			out = formatted
		}
		if err := writeNewFile(filepath.Join(dir, filepath.FromSlash(rel)), out); err != nil {
			return written, err
		}
		written = append(written, rel)
	}
	return written, nil
}

// writeNewFile writes data to a file that must not exist yet.
func writeNewFile(name string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
