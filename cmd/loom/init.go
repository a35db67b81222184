package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/loomrt/loom/internal/daemon"
)

// loomModules are Loom's modules a module made by loom init builds with:
// the root, the host, storage/etcd (which host imports), and cmd/loom (its
// tool directive, for `go tool loom generate`).
var loomModules = []string{"", "host", "storage/etcd", "cmd/loom"}

const loomModule = "github.com/loomrt/loom"

func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loom init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var s scaffold
	var kind, loomDir string
	var tidy bool
	fs.StringVar(&s.Module, "module", "", "the new module's `path` (required), e.g. example.com/shop")
	fs.StringVar(&loomDir, "loom", "", "a `directory` holding a Loom checkout: go.mod replaces Loom's modules with it (needed until Loom is published)")
	fs.StringVar(&kind, "kind", "Widget", "the resource `kind` to create, UpperCamelCase")
	fs.StringVar(&s.Group, "group", "", "the resource `group`, also the Go package of the types (default: the module path's last element)")
	fs.BoolVar(&s.Remote, "remote", false, "also write cmd/NAME-controller, the controllers in a process of their own")
	fs.BoolVar(&tidy, "tidy", true, "run go mod tidy in the new module (-tidy=false leaves go.mod with Loom's modules only)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: loom init -module PATH [-loom DIR] [-kind KIND] [-group GROUP] [-remote] DIR\n\n"+
			"Creates a Go module in DIR (new or empty), ready to build and test: a resource type\n"+
			"(its .proto and generated Go, its Mutate and Validate hooks), a controller that keeps\n"+
			"an owned record per resource (finalizer, conditions), unit and end-to-end tests,\n"+
			"a host on host.Main (the flags of loom server), a Makefile (generate, test, run),\n"+
			"a README and an example to loom apply. Then `loom create type` adds types.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nExamples:\n  loom init -module example.com/shop -loom ~/src/loom -kind Order shop\n"+
			"  cd shop && make test && make run\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{Err: err}
	}
	if fs.NArg() != 1 {
		return usagef("init takes one directory (got %d arguments)", fs.NArg())
	}
	dir := fs.Arg(0)
	if s.Module == "" {
		return usagef("init: -module is required: the new module's path, e.g. example.com/%s", filepath.Base(dir))
	}
	s.Name = path.Base(s.Module)
	if s.Group == "" {
		s.Group = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
				return r
			}
			return -1
		}, strings.ToLower(s.Name))
	}
	if err := checkGroup(s.Group); err != nil {
		return err
	}
	s, err := s.withKind(kind)
	if err != nil {
		return err
	}
	if err := checkEmptyDir(dir); err != nil {
		return err
	}
	goMod, err := newGoMod(s.Module, loomDir)
	if err != nil {
		return err
	}
	if err := writeNewFile(filepath.Join(dir, "go.mod"), goMod); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if _, err := s.render(dir, s.moduleFiles()); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if err := s.addKind(ctx, dir); err != nil {
		return fmt.Errorf("init: %w", err)
	}
	if tidy {
		if err := goModTidy(ctx, dir, stderr); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "Created module %s in %s, with type %s.v1.%s.\nNext:\n  cd %s\n  make test\n  make run\n", s.Module, dir, s.Group, s.Kind, dir)
	return nil
}

func runCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "type" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
			fmt.Fprintf(stderr, "Usage: loom create type -kind KIND [-dir DIR]\n")
			return flag.ErrHelp
		}
		return usagef("create: say what to create: loom create type -kind KIND")
	}
	fs := flag.NewFlagSet("loom create type", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var kind, dir string
	fs.StringVar(&kind, "kind", "", "the resource `kind` to add, UpperCamelCase (required)")
	fs.StringVar(&dir, "dir", ".", "the `directory` of the module, made by loom init")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: loom create type -kind KIND [-dir DIR]\n\n"+
			"Adds a resource type to a module made by loom init, in its group: a .proto and its\n"+
			"generated Go, the registration with Mutate and Validate hooks, a controller and its\n"+
			"test, an example, and the type's line in the group's kinds.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nExample:\n  loom create type -kind Invoice\n")
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{Err: err}
	}
	if fs.NArg() > 0 {
		return usagef("create type takes no arguments")
	}
	if kind == "" {
		return usagef("create type: -kind is required")
	}
	s, err := readScaffold(dir)
	if err != nil {
		return err
	}
	if s, err = s.withKind(kind); err != nil {
		return err
	}
	if err := s.addKind(ctx, dir); err != nil {
		return fmt.Errorf("create type: %w", err)
	}
	fmt.Fprintf(stdout, "Added type %s.v1.%s: %s/%s.go, its controller and test.\n", s.Group, s.Kind, s.Pkg(), s.FileKind)
	return nil
}

// addKind writes s's kind into the module in dir: its files, its Go code
// generated from its .proto, and its line in the group's kinds.
func (s scaffold) addKind(ctx context.Context, dir string) error {
	files := s.kindFiles()
	for _, rel := range files {
		if _, err := os.Stat(filepath.Join(dir, rel)); err == nil {
			return fmt.Errorf("%s exists: is there a type %s already?", rel, s.Kind)
		}
	}
	if err := s.addToKinds(filepath.Join(dir, s.Pkg(), "group.go")); err != nil {
		return err
	}
	if _, err := s.render(dir, files); err != nil {
		return err
	}
	return generate(ctx, generateOptions{
		includes: []string{dir},
		out:      dir,
		goOpt:    "paths=source_relative",
		files:    []string{path.Join(s.PbDir(), s.FileKind+".proto")},
	})
}

// kindsOpening starts the list of the group's types in group.go.
const kindsOpening = "var kinds = []kind{\n"

// addToKinds adds s's kind to the list in group.go, unless it is there.
func (s scaffold) addToKinds(groupFile string) error {
	src, err := os.ReadFile(groupFile)
	if err != nil {
		return err
	}
	line := fmt.Sprintf("{register%s, %sController},", s.Kind, s.Kind)
	if bytes.Contains(src, []byte(line)) {
		return nil
	}
	start := bytes.Index(src, []byte(kindsOpening))
	end := -1
	if start >= 0 {
		end = bytes.Index(src[start:], []byte("\n}\n"))
	}
	if end < 0 {
		return fmt.Errorf("%s: no %q list ending in a line \"}\" to add the type to", groupFile, strings.TrimSpace(kindsOpening))
	}
	at := start + end + 1
	out := append(append(append([]byte{}, src[:at]...), "\t"+line+"\n"...), src[at:]...)
	if out, err = format.Source(out); err != nil {
		return fmt.Errorf("%s: %v", groupFile, err)
	}
	return os.WriteFile(groupFile, out, 0o644)
}

// readScaffold finds the module path and group of a module loom init made
// in dir.
func readScaffold(dir string) (scaffold, error) {
	goMod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return scaffold{}, fmt.Errorf("create type: %w (run it in a module made by loom init, or give -dir)", err)
	}
	var s scaffold
	for _, l := range strings.Split(string(goMod), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			s.Module = strings.Trim(strings.TrimSpace(m), `"`)
		}
	}
	groups, _ := filepath.Glob(filepath.Join(dir, "proto", "pb*", "v1"))
	if s.Module == "" || len(groups) != 1 {
		return s, fmt.Errorf("create type: %s does not look like a module made by loom init (go.mod's module and one proto/pbGROUP/v1 directory)", dir)
	}
	s.Name = path.Base(s.Module)
	s.Group = strings.TrimPrefix(filepath.Base(filepath.Dir(groups[0])), "pb")
	return s, checkGroup(s.Group)
}

// checkEmptyDir fails unless dir is missing or empty.
func checkEmptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("init: %w", err)
	case len(entries) > 0:
		return usagef("init: %s is not empty: give a new or empty directory", dir)
	}
	return nil
}

// newGoMod is the go.mod of a new module: Loom's modules required, and
// replaced with the checkout in loomDir if given.
func newGoMod(module, loomDir string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "module %s\n\ngo %s\n\nrequire (\n", module, goVersion())
	version := "v0.0.0"
	if loomDir == "" {
		v := versionOfLoom()
		if v == "" {
			return nil, usagef("init: give -loom DIR, a Loom checkout: this loom was built from one, and Loom's modules are not published")
		}
		version = v
	}
	for _, m := range loomModules {
		fmt.Fprintf(&b, "\t%s %s\n", path.Join(loomModule, m), version)
	}
	fmt.Fprintf(&b, ")\n\ntool %s/cmd/loom\n", loomModule)
	if loomDir != "" {
		abs, err := filepath.Abs(loomDir)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(abs, "go.work")); err != nil {
			return nil, usagef("init: -loom %s: not a Loom checkout (no go.work)", loomDir)
		}
		b.WriteString("\n// Loom's modules, from a checkout of it.\n")
		for _, m := range loomModules {
			fmt.Fprintf(&b, "replace %s => %s\n", path.Join(loomModule, m), filepath.Join(abs, m))
		}
	}
	return b.Bytes(), nil
}

// goVersion is the go directive of a new module: the Go release this loom
// was built with.
func goVersion() string {
	v := strings.TrimPrefix(runtime.Version(), "go")
	if i := strings.IndexAny(v, " -"); i >= 0 || !strings.Contains(v, ".") {
		return "1.26"
	}
	return v
}

// versionOfLoom is the module version this loom was built as, or "" for a
// build from a checkout.
func versionOfLoom() string {
	if version != "" {
		return version
	}
	if v := daemon.ReadBuildInfo().Version; v != "(devel)" && v != "" {
		return v
	}
	return ""
}

// goModTidy runs go mod tidy in dir, outside any workspace.
func goModTidy(ctx context.Context, dir string, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, "go", "mod", "tidy")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("init: go mod tidy in %s: %v\n%s", dir, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}
