package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGenerateReproducesCommittedFiles runs what `make proto` runs (the
// Makefile's proto target: loom generate, then pbpatch on resource.pb.go)
// into a temporary directory, and checks every committed generated file of
// the repository comes out byte for byte.
func TestGenerateReproducesCommittedFiles(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	install := exec.Command("go", "install", "google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2")
	install.Env = append(os.Environ(), "GOBIN="+bin, "GOWORK=off")
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("go install protoc-gen-go-grpc: %v\n%s", err, out)
	}
	grpcPlugin := filepath.Join(bin, "protoc-gen-go-grpc")

	out := t.TempDir()
	steps := []generateOptions{
		{includes: []string{"proto"}, out: "proto", grpc: true, files: []string{"pbresource/resource.proto"}},
		{includes: []string{"proto"}, out: "proto", files: []string{"pblease/v1/lease.proto"}},
		{includes: []string{"proto"}, out: "proto", grpc: true, files: []string{"pbhistory/v1/history.proto", "pbbulk/v1/bulk.proto", "pbcatalog/v1/catalog.proto"}},
		{includes: []string{"proto", "."}, out: ".", files: []string{"examples/foo/pbfoo/v1/foo.proto", "examples/foo/pbfoo/v2/foo.proto"}},
		{includes: []string{"examples/hello"}, out: "examples/hello", files: []string{"pbhello/v1/hello.proto"}},
	}
	for _, o := range steps {
		for i, dir := range o.includes {
			o.includes[i] = filepath.Join(root, dir)
		}
		o.out = filepath.Join(out, o.out)
		o.goOpt = "paths=source_relative"
		o.grpcPlugin = grpcPlugin
		if err := generate(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	patch := exec.Command("go", "run", "./proto/internal/pbpatch", filepath.Join(out, "proto/pbresource/resource.pb.go"))
	patch.Dir = root
	if b, err := patch.CombinedOutput(); err != nil {
		t.Fatalf("pbpatch: %v\n%s", err, b)
	}

	n := 0
	err = filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(out, path)
		got, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		want, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Errorf("%s: generated, but not committed: %v", rel, err)
			return nil
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the committed file differs from what make proto generates; run make proto", rel)
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != 12 {
		t.Errorf("compared %d generated files, want the repository's 12", n)
	}
}
