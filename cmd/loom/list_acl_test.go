package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A token that may list a type but not read it lists nothing: the CLI says
// so, the same whether anything exists or not, and not to a viewer (list
// and read), as the ACL docs show it.
func TestListSaysWhenTheTokenMayNotRead(t *testing.T) {
	aclFile := filepath.Join(t.TempDir(), "acl.yaml")
	if err := os.WriteFile(aclFile, []byte(`tokens:
  - name: writer
    secret: writer-secret
    rules:
      - {type: "foo.*.*", partition: "*", namespace: "*", access: write}
  - name: lister
    secret: lister-secret
    rules:
      - {type: "foo.*.*", partition: "*", namespace: "*", access: list}
  - name: viewer
    secret: viewer-secret
    rules:
      - {type: "foo.*.*", partition: "*", namespace: "*", access: list}
      - {type: "foo.*.*", partition: "*", namespace: "*", access: read}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	addr, _, _ := startServer(t, "-dev", "-grpc-addr", "127.0.0.1:0", "-acl-file", aclFile)
	list := func(token string, args ...string) (string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := run(context.Background(), append([]string{"list", "-addr", addr, "-token", token}, args...), &stdout, &stderr)
		if err != nil {
			t.Fatalf("list %v with %s: %v", args, token, err)
		}
		return stdout.String(), stderr.String()
	}
	const note = "loom: note: the token may not read foo.v1.Bar: a list shows only what it may read (a viewer needs read and list)\n"

	_, before := list("lister-secret", "foo.v1.Bar")
	if before != "No resources found.\n"+note {
		t.Errorf("list with list but not read printed on stderr %q, want %q", before, "No resources found.\n"+note)
	}
	bar := filepath.Join(t.TempDir(), "bar.yaml")
	if err := os.WriteFile(bar, []byte(oneBar), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, context.Background(), "apply", "-addr", addr, "-token", "writer-secret", "-f", bar); err != nil {
		t.Fatal(err)
	}
	out, after := list("lister-secret", "foo.v1.Bar", "-namespace", "*", "-o", "json")
	if out != "[]\n" || after != note {
		t.Errorf("list -namespace '*' -o json with list but not read printed %q and on stderr %q", out, after)
	}
	if _, errOut := list("lister-secret", "foo.v1.Bar", "-namespace", "team-a"); errOut != "No resources found.\n"+strings.Replace(note, "foo.v1.Bar", "foo.v1.Bar in namespace team-a", 1) {
		t.Errorf("list -namespace team-a with list but not read printed on stderr %q", errOut)
	}
	if _, again := list("lister-secret", "foo.v1.Bar"); again != before {
		t.Errorf("the note once a Bar exists is %q, not %q as before: it tells what exists", again, before)
	}

	if out, errOut := list("viewer-secret", "foo.v1.Bar", "-o", "name"); out != "foo.v1.Bar/default.default/a\n" || errOut != "" {
		t.Errorf("list with list and read printed %q and on stderr %q, want the Bar and nothing else", out, errOut)
	}
	if _, errOut := list("viewer-secret", "foo.v1.Bar", "-prefix", "zzz"); errOut != "No resources found.\n" {
		t.Errorf("an empty list with list and read printed on stderr %q, want no note", errOut)
	}
}
