package main

import (
	"fmt"
	"strings"
	"testing"
)

// The operator's round trip: export a server to a file, import it with
// -preserve into an empty one, which then holds the same resources (uids,
// finalizers, statuses); a second import changes nothing; an import with
// a bad document writes nothing and names every rejected document.
func TestCLIExportImport(t *testing.T) {
	srcAddr := startWidgetServer(t)
	src := newCLI(t, srcAddr)
	var file strings.Builder
	for i := range 30 {
		fmt.Fprintf(&file, "id: {type: clitest.v1.Widget, name: w%02d}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, size: %d}\n---\n", i, i)
	}
	path := writeFile(t, "widgets.yaml", file.String())
	if out := src.ok("apply", "-f", path); strings.Count(out, " created\n") != 30 {
		t.Fatalf("apply of 30 (the bulk path) printed\n%s", out)
	}
	actAsController(t, srcAddr, "w07")

	backup, errOut, code := src.run("export")
	if code != 0 || !strings.Contains(errOut, "exported 30 resource(s) at version") {
		t.Fatalf("export: exit %d, stderr %q", code, errOut)
	}
	backupPath := writeFile(t, "backup.yaml", backup)
	if out := src.ok("import", "-f", backupPath); out != "imported 30 resource(s): 0 created, 0 updated, 30 unchanged\n" {
		t.Errorf("import into the server exported: %q", out)
	}

	dstAddr := startWidgetServer(t)
	dst := newCLI(t, dstAddr)
	if out := dst.ok("import", "-preserve", "-dry-run", "-f", backupPath); out != "would import (dry run) 30 resource(s): 30 created, 0 updated, 0 unchanged\n" {
		t.Errorf("import -dry-run: %q", out)
	}
	if out := dst.ok("list", "clitest.v1.Widget", "-o", "name"); out != "" {
		t.Errorf("a dry run wrote:\n%s", out)
	}
	if out := dst.ok("import", "-preserve", "-f", backupPath); out != "imported 30 resource(s): 30 created, 0 updated, 0 unchanged\n" {
		t.Errorf("import -preserve: %q", out)
	}
	if a, b := withoutVersions(src.ok("read", "clitest.v1.Widget", "w07")), withoutVersions(dst.ok("read", "clitest.v1.Widget", "w07")); a != b || !strings.Contains(b, "ctrl/cleanup") {
		t.Errorf("w07 differs after the round trip:\n%s\nwant\n%s", b, a)
	}
	if out := dst.ok("import", "-preserve", "-f", backupPath); out != "imported 30 resource(s): 0 created, 0 updated, 30 unchanged\n" {
		t.Errorf("second import -preserve: %q", out)
	}

	bad := writeFile(t, "bad.yaml", "id: {type: clitest.v1.Widget, name: new}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, size: 1}\n---\n"+
		"id: {type: clitest.v1.Widget, name: neg}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, size: -1}\n---\n"+
		"id: {type: clitest.v1.Widget, name: neg2}\ndata: {'@type': type.googleapis.com/loom.clitest.v1.Widget, size: -2}\n")
	out, errOut, code := dst.run("import", "-f", bad)
	if code != 1 || out != "" || !strings.Contains(errOut, "2 resource(s) rejected, nothing was written") ||
		!strings.Contains(errOut, bad+": document 2: ") || !strings.Contains(errOut, bad+": document 3: ") {
		t.Errorf("import of a bad file: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if out := dst.ok("list", "clitest.v1.Widget", "-prefix", "new", "-o", "name"); out != "" {
		t.Errorf("a rejected import wrote:\n%s", out)
	}
}

// withoutVersions drops the version lines of read's YAML.
func withoutVersions(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "version:") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
