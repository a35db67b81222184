package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestInitModuleBuildsAndTests is what a new user does: loom init a module
// pointed at this checkout, then go vet and go test -race it (its tests
// assert what its hooks and controller do); loom create type, and again.
func TestInitModuleBuildsAndTests(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and tests a new module: not with -short")
	}
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "shop")
	loom := func(args ...string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := exitCode(run(context.Background(), args, &stdout, &stderr), &stderr); code != 0 {
			t.Fatalf("loom %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
		}
	}
	goCmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s in the new module: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	testArgs := []string{"test", "-count=1", "./..."}
	if out, _ := exec.Command("go", "env", "CGO_ENABLED").Output(); strings.TrimSpace(string(out)) == "1" {
		testArgs = slices.Insert(testArgs, 1, "-race")
	}

	loom("init", "-module", "example.com/shop", "-loom", checkout, "-kind", "Order", "-remote", dir)
	checkScaffold(t, dir, "shop/order_controller.go", "proto/pbshop/v1/order.pb.go", "cmd/shop-controller/main.go", "examples/order.yaml")
	goCmd("vet", "./...")
	goCmd(testArgs...)

	loom("create", "type", "-dir", dir, "-kind", "OrderItem")
	checkScaffold(t, dir, "shop/order_item_controller.go", "shop/order_item_test.go", "proto/pbshop/v1/order_item.pb.go")
	goCmd("vet", "./...")
	goCmd(testArgs...)
}

// checkScaffold checks the files are in dir, and that its Go files are
// gofmt'd and carry no TODO.
func checkScaffold(t *testing.T, dir string, files ...string) {
	t.Helper()
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("loom did not write %s: %v", f, err)
		}
	}
	out, err := exec.Command("gofmt", "-l", dir).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("gofmt -l: %v\n%s", err, out)
	}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".go") {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte("TODO")) {
				t.Errorf("%s has a TODO", path)
			}
		}
		return err
	})
}

func TestInitRefuses(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"init", "-module", "example.com/a", "-loom", "../..", full}, "is not empty"},
		{[]string{"init", "-loom", "../..", t.TempDir()}, "-module is required"},
		{[]string{"init", "-module", "example.com/a", "-loom", "../..", "-kind", "order", t.TempDir()}, "UpperCamelCase"},
		{[]string{"init", "-module", "example.com/a", "-loom", "../..", "-group", "host", t.TempDir()}, "-group \"host\""},
		{[]string{"init", "-module", "example.com/a", "-loom", t.TempDir(), t.TempDir()}, "not a Loom checkout"},
		{[]string{"create", "type", "-kind", "Order", "-dir", t.TempDir()}, "go.mod"},
	} {
		var stdout, stderr bytes.Buffer
		code := exitCode(run(context.Background(), tc.args, &stdout, &stderr), &stderr)
		if code == 0 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("loom %v: exit %d, stderr %q; want an error saying %q", tc.args, code, stderr.String(), tc.want)
		}
	}
}

func TestScaffoldNames(t *testing.T) {
	for kind, want := range map[string][4]string{
		"Order":     {"order", "order", "order", "order"},
		"OrderItem": {"order item", "order_item", "order-item", "orderItem"},
		"HTTPRoute": {"http route", "http_route", "http-route", "httpRoute"},
		"Type":      {"type", "type", "type", "typeRes"},
	} {
		s, err := scaffold{Group: "shop"}.withKind(kind)
		got := [4]string{s.LowerKind, s.FileKind, s.KebabKind, s.Var}
		if err != nil || got != want {
			t.Errorf("withKind(%q) = %q, %v; want %q", kind, got, err, want)
		}
	}
}
