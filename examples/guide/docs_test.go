package guide

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

// TestDocSnippetsAreCode checks that every Go snippet in docs/*.md appears,
// word for word (indentation aside), in a Go file of the repository, so the
// docs show code that compiles and is tested.
func TestDocSnippetsAreCode(t *testing.T) {
	root := filepath.Join("..", "..")
	var sources []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sources = append(sources, normalize(string(b)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goBlock.FindAllStringSubmatch(string(b), -1) {
			snippet := normalize(m[1])
			found := false
			for _, src := range sources {
				if strings.Contains(src, snippet) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("%s: this snippet is not in any Go file; keep the docs and the code in step:\n%s", filepath.Base(doc), m[1])
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no Go snippets found in docs/; is the path right?")
	}
}

// normalize drops indentation and blank lines, so a snippet matches the code
// it was taken from whatever its nesting.
func normalize(s string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line != "" {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
