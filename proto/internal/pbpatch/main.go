// Command pbpatch post-processes a .pb.go file written by protoc-gen-go so
// that its init registers the file's descriptor and types in registries of
// the package's own (the package-level fileRegistry and typeRegistry)
// instead of protobuf-go's global ones. `make proto` runs it on
// proto/pbresource/resource.pb.go; see that package's doc for why.
//
// Usage: go run ./proto/internal/pbpatch FILE...
//
// Each FILE is rewritten in place. A file already patched is left as it is,
// so running pbpatch twice changes nothing.
package main

import (
	"bytes"
	"fmt"
	"go/format"
	"os"
	"regexp"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: pbpatch FILE...")
		os.Exit(2)
	}
	for _, name := range os.Args[1:] {
		if err := patchFile(name); err != nil {
			fmt.Fprintln(os.Stderr, "pbpatch:", err)
			os.Exit(1)
		}
	}
}

func patchFile(name string) error {
	src, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	out, err := patch(src)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if bytes.Equal(out, src) {
		return nil
	}
	return os.WriteFile(name, out, 0o644)
}

// The two struct literals of the generated init function that get a
// registry each: protoimpl.DescBuilder (which registers the descriptor) and
// protoimpl.TypeBuilder (which registers the messages and enums). Both use
// the global registries when these fields are nil.
var (
	descBuilder = regexp.MustCompile(`(?m)^([ \t]*)File:[ \t]*protoimpl\.DescBuilder\{\n`)
	typeBuilder = regexp.MustCompile(`(?m)^([ \t]*)out[ \t]*:=[ \t]*protoimpl\.TypeBuilder\{\n`)

	patchedDesc = regexp.MustCompile(`(?m)^[ \t]*FileRegistry:[ \t]*fileRegistry,`)
	patchedType = regexp.MustCompile(`(?m)^[ \t]*TypeRegistry:[ \t]*typeRegistry,`)
	anyRegistry = regexp.MustCompile(`(?m)^[ \t]*(FileRegistry|TypeRegistry):`)
)

// patch returns src with FileRegistry and TypeRegistry set in the generated
// init function, gofmt-ed. It fails unless src has exactly one of each
// builder literal, so a change in protoc-gen-go's output is noticed rather
// than silently left unpatched.
func patch(src []byte) ([]byte, error) {
	if len(patchedDesc.FindAll(src, -1)) == 1 && len(patchedType.FindAll(src, -1)) == 1 &&
		len(anyRegistry.FindAll(src, -1)) == 2 {
		return src, nil // already patched
	}
	if anyRegistry.Match(src) {
		return nil, fmt.Errorf("the generated code already sets a FileRegistry or TypeRegistry of its own")
	}
	out, err := insertAfter(src, descBuilder, "\tFileRegistry: fileRegistry, // the package's own, not protoregistry.GlobalFiles\n")
	if err != nil {
		return nil, fmt.Errorf("protoimpl.DescBuilder literal: %w", err)
	}
	out, err = insertAfter(out, typeBuilder, "\tTypeRegistry: typeRegistry, // the package's own, not protoregistry.GlobalTypes\n")
	if err != nil {
		return nil, fmt.Errorf("protoimpl.TypeBuilder literal: %w", err)
	}
	return format.Source(out)
}

// insertAfter inserts line, indented one more level than the match, after
// the one match of re in src.
func insertAfter(src []byte, re *regexp.Regexp, line string) ([]byte, error) {
	m := re.FindAllSubmatchIndex(src, -1)
	if len(m) != 1 {
		return nil, fmt.Errorf("found %d, want exactly 1 (has protoc-gen-go's output changed?)", len(m))
	}
	end, indent := m[0][1], src[m[0][2]:m[0][3]]
	var b bytes.Buffer
	b.Grow(len(src) + len(indent) + len(line))
	b.Write(src[:end])
	b.Write(indent)
	b.WriteString(line)
	b.Write(src[end:])
	return b.Bytes(), nil
}
