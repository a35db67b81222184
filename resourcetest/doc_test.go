package resourcetest_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// snippets returns the regions of a Go source marked with "// snippet: name"
// and "// end snippet" lines, without the markers and dedented.
func snippets(t *testing.T, src string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var name string
	var body []string
	for _, line := range strings.Split(src, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "// snippet: "):
			require.Empty(t, name, "snippet %q starts inside snippet %q", trimmed, name)
			name, body = strings.TrimPrefix(trimmed, "// snippet: "), nil
		case trimmed == "// end snippet":
			require.NotEmpty(t, name, "an end of snippet without a start")
			out[name] = dedent(body)
			name = ""
		case name != "":
			body = append(body, line)
		}
	}
	require.Empty(t, name, "snippet %q has no end", name)
	return out
}

// dedent removes the tabs every non-empty line starts with, and blank lines
// at both ends.
func dedent(lines []string) string {
	common := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, "\t"))
		if common < 0 || n < common {
			common = n
		}
	}
	var out []string
	for _, l := range lines {
		if len(l) >= common && common > 0 {
			l = l[common:]
		}
		out = append(out, l)
	}
	return strings.Trim(strings.Join(out, "\n"), "\n")
}

var docSnippet = regexp.MustCompile("(?s)<!-- snippet: ([a-z-]+) -->\n```go\n(.*?)\n```")

// TestDocSnippets keeps docs/testing.md quoting example_test.go exactly,
// so every snippet in the guide is code that compiles and runs.
func TestDocSnippets(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	require.NoError(t, err)
	doc, err := os.ReadFile("../docs/testing.md")
	require.NoError(t, err)

	want := snippets(t, string(src))
	require.NotEmpty(t, want)
	quoted := map[string]bool{}
	for _, m := range docSnippet.FindAllStringSubmatch(string(doc), -1) {
		name, body := m[1], m[2]
		code, ok := want[name]
		require.True(t, ok, "docs/testing.md quotes snippet %q, which example_test.go does not mark", name)
		require.Equal(t, code, body, "docs/testing.md quotes snippet %q differently from example_test.go", name)
		quoted[name] = true
	}
	for name := range want {
		require.True(t, quoted[name], "snippet %q of example_test.go is not quoted in docs/testing.md", name)
	}
	require.Equal(t, strings.Count(string(doc), "<!-- snippet:"), len(quoted), "a snippet marker in docs/testing.md is not followed by a go code block")
}
