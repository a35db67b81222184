package main

import (
	"fmt"
	"strings"
)

// maxDiffCells bounds the work of lineDiff's LCS table: beyond it, the
// changed middle of two texts is shown as removed whole and added whole.
const maxDiffCells = 4 << 20

// diffContext is how many unchanged lines a hunk shows around a change.
const diffContext = 3

// unifiedDiff returns the unified diff (as diff -u prints it, with
// diffContext lines of context) of the lines of a and b under the given
// header names, or "" when they are equal.
func unifiedDiff(nameA, nameB, a, b string) string {
	x, y := splitLines(a), splitLines(b)
	ops := lineDiff(x, y)
	var out strings.Builder
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: from diffContext lines before this change to
		// diffContext lines after the last change within reach.
		start := max(i-diffContext, 0)
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j + 1
			} else if j-end >= 2*diffContext {
				break
			}
		}
		end = min(end+diffContext, len(ops))
		if out.Len() == 0 {
			fmt.Fprintf(&out, "--- %s\n+++ %s\n", nameA, nameB)
		}
		hunk(&out, ops[start:end])
		i = end
	}
	return out.String()
}

// hunk writes one hunk of ops: its header and its lines.
func hunk(out *strings.Builder, ops []diffOp) {
	fromA, fromB := ops[0].a+1, ops[0].b+1
	var countA, countB int
	for _, op := range ops {
		if op.kind != '+' {
			countA++
		}
		if op.kind != '-' {
			countB++
		}
	}
	if countA == 0 {
		fromA-- // diff -u's convention for an empty range
	}
	if countB == 0 {
		fromB--
	}
	fmt.Fprintf(out, "@@ -%d,%d +%d,%d @@\n", fromA, countA, fromB, countB)
	for _, op := range ops {
		fmt.Fprintf(out, "%c%s\n", op.kind, op.line)
	}
}

// diffOp is one line of a diff: kept (' '), removed ('-') or added ('+'),
// with the index each text is at when it comes.
type diffOp struct {
	kind byte
	line string
	a, b int
}

// lineDiff returns the edit script from x to y: a longest common
// subsequence of their lines between the common prefix and suffix.
func lineDiff(x, y []string) []diffOp {
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	var ops []diffOp
	for i := range pre {
		ops = append(ops, diffOp{' ', x[i], i, i})
	}
	ops = append(ops, lcsDiff(x[pre:len(x)-suf], y[pre:len(y)-suf], pre)...)
	for i := suf; i > 0; i-- {
		ops = append(ops, diffOp{' ', x[len(x)-i], len(x) - i, len(y) - i})
	}
	return ops
}

// lcsDiff diffs x and y, which start at line off of both texts, by a table
// of the lengths of their longest common subsequences.
func lcsDiff(x, y []string, off int) []diffOp {
	var ops []diffOp
	n, m := len(x), len(y)
	if n*m > maxDiffCells {
		for i, l := range x {
			ops = append(ops, diffOp{'-', l, off + i, off})
		}
		for j, l := range y {
			ops = append(ops, diffOp{'+', l, off + n, off + j})
		}
		return ops
	}
	// lcs[i][j] is the length of the LCS of x[i:] and y[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			ops = append(ops, diffOp{' ', x[i], off + i, off + j})
			i, j = i+1, j+1
		case j == m || (i < n && lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', x[i], off + i, off + j})
			i++
		default:
			ops = append(ops, diffOp{'+', y[j], off + i, off + j})
			j++
		}
	}
	return ops
}

// splitLines splits s into lines, without their newlines; "" has none.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
