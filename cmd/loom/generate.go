package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/bufbuild/protocompile"
	"github.com/bufbuild/protocompile/linker"
	gengo "google.golang.org/protobuf/cmd/protoc-gen-go/internal_gengo"
	"google.golang.org/protobuf/compiler/protogen"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/pluginpb"

	"github.com/loomrt/loom/proto/pbresource"
)

// grpcPluginDefault runs the protoc-gen-go-grpc that made the repository's
// committed _grpc.pb.go files (the Makefile pins the same version).
const grpcPluginDefault = "go run google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2"

// generateOptions says what `loom generate` compiles and where it writes.
type generateOptions struct {
	includes   []string // directories searched for imports, in order
	out        string   // directory the generated files are written under
	goOpt      string   // protoc-gen-go's parameter, e.g. "paths=source_relative"
	grpc       bool     // also generate gRPC stubs
	grpcPlugin string   // command line of the protoc-gen-go-grpc plugin
	files      []string // .proto files, relative to an include directory
}

func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("loom generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o generateOptions
	fs.Func("I", "a `directory` to search for imports, repeatable (default .)", func(s string) error {
		o.includes = append(o.includes, s)
		return nil
	})
	fs.StringVar(&o.out, "out", ".", "the `directory` the generated files are written under")
	fs.StringVar(&o.goOpt, "go-opt", "paths=source_relative", "protoc-gen-go's `parameter` (paths=source_relative, or module=PATH)")
	fs.BoolVar(&o.grpc, "grpc", false, "also generate gRPC service stubs (_grpc.pb.go) with protoc-gen-go-grpc")
	fs.StringVar(&o.grpcPlugin, "grpc-plugin", grpcPluginDefault, "the `command` that runs protoc-gen-go-grpc, for -grpc")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: loom generate [-I DIR]... [-out DIR] [-go-opt PARAM] [-grpc] FILE.proto...\n\n"+
			"Compiles .proto files and writes their Go code, as protoc with protoc-gen-go would, with\n"+
			"nothing installed but Go: the compiler (protocompile) and protoc-gen-go are built in.\n"+
			"FILEs are named relative to an -I directory, as in their import statements. Imports of\n"+
			"google/protobuf/*.proto and Loom's pbresource/resource.proto are found without -I.\n"+
			"gRPC stubs (-grpc) come from running protoc-gen-go-grpc as a plugin.\n\nFlags:\n")
		fs.PrintDefaults()
		fmt.Fprintf(stderr, "\nExamples:\n  loom generate pbshop/v1/order.proto\n  loom generate -I proto -out proto -grpc pbhistory/v1/history.proto\n")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{Err: err}
	}
	if fs.NArg() == 0 {
		return usagef("generate: no .proto files given")
	}
	o.files = fs.Args()
	if len(o.includes) == 0 {
		o.includes = []string{"."}
	}
	return generate(ctx, o)
}

// generate compiles o.files and writes their generated Go code.
func generate(ctx context.Context, o generateOptions) error {
	req, err := codeGeneratorRequest(ctx, o.includes, o.files)
	if err != nil {
		return err
	}
	req.Parameter = proto.String(o.goOpt)
	resp, err := generateGo(req)
	if err != nil {
		return err
	}
	if err := writeResponse(o.out, resp); err != nil {
		return err
	}
	if !o.grpc {
		return nil
	}
	resp, err = runPlugin(ctx, o.grpcPlugin, req)
	if err != nil {
		return err
	}
	return writeResponse(o.out, resp)
}

// codeGeneratorRequest compiles files, found in includes, into the request
// protoc would send a plugin: the files and all they import, dependencies
// first.
func codeGeneratorRequest(ctx context.Context, includes, files []string) (*pluginpb.CodeGeneratorRequest, error) {
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.CompositeResolver{
			&protocompile.SourceResolver{ImportPaths: includes},
			protocompile.ResolverFunc(builtinProto),
		}),
		SourceInfoMode: protocompile.SourceInfoStandard,
	}
	compiled, err := c.Compile(ctx, files...)
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	req := &pluginpb.CodeGeneratorRequest{FileToGenerate: files}
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imports := f.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		req.ProtoFile = append(req.ProtoFile, fileProto(f))
	}
	for _, f := range compiled {
		add(f)
	}
	return req, nil
}

// builtinProto finds Loom's pbresource/resource.proto, which users' types
// import, in the loom binary itself when no -I directory holds it.
func builtinProto(path string) (protocompile.SearchResult, error) {
	if path == pbresource.File_pbresource_resource_proto.Path() {
		return protocompile.SearchResult{Desc: pbresource.File_pbresource_resource_proto}, nil
	}
	return protocompile.SearchResult{}, os.ErrNotExist
}

// fileProto is f as a descriptor proto: the compiler's own for a file it
// compiled from source (with its comments), else f's.
func fileProto(f protoreflect.FileDescriptor) *descriptorpb.FileDescriptorProto {
	if r, ok := f.(linker.Result); ok {
		return r.FileDescriptorProto()
	}
	return protodesc.ToFileDescriptorProto(f)
}

// generateGo is protoc-gen-go, run in this process.
func generateGo(req *pluginpb.CodeGeneratorRequest) (*pluginpb.CodeGeneratorResponse, error) {
	gen, err := protogen.Options{}.New(req)
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	for _, f := range gen.Files {
		if f.Generate {
			gengo.GenerateFile(gen, f)
		}
	}
	gen.SupportedFeatures = gengo.SupportedFeatures
	gen.SupportedEditionsMinimum = gengo.SupportedEditionsMinimum
	gen.SupportedEditionsMaximum = gengo.SupportedEditionsMaximum
	return gen.Response(), nil
}

// runPlugin runs a protoc plugin given as a command line, sending it req.
func runPlugin(ctx context.Context, command string, req *pluginpb.CodeGeneratorRequest) (*pluginpb.CodeGeneratorResponse, error) {
	in, err := proto.Marshal(req)
	if err != nil {
		return nil, err
	}
	argv := strings.Fields(command)
	if len(argv) == 0 {
		return nil, usagef("generate: -grpc-plugin is empty")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("generate: running %q: %v: %s", command, err, bytes.TrimSpace(stderr.Bytes()))
	}
	resp := new(pluginpb.CodeGeneratorResponse)
	if err := proto.Unmarshal(stdout.Bytes(), resp); err != nil {
		return nil, fmt.Errorf("generate: reading %q's answer: %v", command, err)
	}
	return resp, nil
}

// writeResponse writes the files of a plugin's answer under dir, or returns
// the error it reports.
func writeResponse(dir string, resp *pluginpb.CodeGeneratorResponse) error {
	if e := resp.GetError(); e != "" {
		return fmt.Errorf("generate: %s", e)
	}
	for _, f := range resp.GetFile() {
		if f.GetInsertionPoint() != "" {
			return fmt.Errorf("generate: %s: insertion points are not supported", f.GetName())
		}
		path := filepath.Join(dir, filepath.FromSlash(f.GetName()))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
		if err := os.WriteFile(path, []byte(f.GetContent()), 0o644); err != nil {
			return fmt.Errorf("generate: %w", err)
		}
	}
	return nil
}
