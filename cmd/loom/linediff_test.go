package main

import (
	"fmt"
	"strings"
	"testing"
)

func TestUnifiedDiff(t *testing.T) {
	lines := func(from, to int, change map[int]string) string {
		var b strings.Builder
		for i := from; i <= to; i++ {
			if c, ok := change[i]; ok {
				if c != "" {
					b.WriteString(c + "\n")
				}
				continue
			}
			fmt.Fprintf(&b, "l%d\n", i)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{"equal", "x\ny\n", "x\ny\n", ""},
		{"from nothing", "", "a\nb\n", "--- A\n+++ B\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"to nothing", "a\n", "", "--- A\n+++ B\n@@ -1,1 +0,0 @@\n-a\n"},
		{"one change, context of 3", lines(1, 10, nil), lines(1, 10, map[int]string{5: "five"}),
			"--- A\n+++ B\n@@ -2,7 +2,7 @@\n l2\n l3\n l4\n-l5\n+five\n l6\n l7\n l8\n"},
		{"an insertion and a removal", "a\nb\nc\n", "a\nx\nb\n",
			"--- A\n+++ B\n@@ -1,3 +1,3 @@\n a\n+x\n b\n-c\n"},
		// Changes 7 unchanged lines apart make two hunks; 6 apart, one.
		{"two hunks", lines(1, 20, nil), lines(1, 20, map[int]string{2: "two", 10: ""}),
			"--- A\n+++ B\n@@ -1,5 +1,5 @@\n l1\n-l2\n+two\n l3\n l4\n l5\n@@ -7,7 +7,6 @@\n l7\n l8\n l9\n-l10\n l11\n l12\n l13\n"},
		{"one hunk", lines(1, 20, nil), lines(1, 20, map[int]string{2: "two", 9: ""}),
			"--- A\n+++ B\n@@ -1,12 +1,11 @@\n l1\n-l2\n+two\n l3\n l4\n l5\n l6\n l7\n l8\n-l9\n l10\n l11\n l12\n"},
	} {
		if got := unifiedDiff("A", "B", tc.a, tc.b); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// TestLineDiffBounded checks that a diff too large for the LCS table is
// still a correct edit script: the old middle removed, the new one added.
func TestLineDiffBounded(t *testing.T) {
	var x, y []string
	for i := range 3000 {
		x = append(x, fmt.Sprint("x", i))
		y = append(y, fmt.Sprint("y", i))
	}
	x = append([]string{"same"}, x...)
	y = append([]string{"same"}, y...)
	ops := lineDiff(x, y)
	var gotX, gotY []string
	for _, op := range ops {
		if op.kind != '+' {
			gotX = append(gotX, op.line)
		}
		if op.kind != '-' {
			gotY = append(gotY, op.line)
		}
	}
	if strings.Join(gotX, "\n") != strings.Join(x, "\n") || strings.Join(gotY, "\n") != strings.Join(y, "\n") {
		t.Fatal("the edit script does not turn x into y")
	}
	if len(ops) != 1+3000+3000 || ops[0].kind != ' ' {
		t.Fatalf("got %d ops, want the common line and 6000 changes", len(ops))
	}
}
