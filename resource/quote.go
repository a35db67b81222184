package resource

import (
	"strconv"
	"unicode/utf8"
)

// MaxQuoted is how many bytes of a caller's input an error message repeats;
// longer input is cut there and its length is given instead, so a request
// carrying a megabyte-long name gets a short error, not its name back.
const MaxQuoted = 64

// Quote renders input for an error message: quoted like fmt's %q, cut to its
// first MaxQuoted bytes (at a character boundary) and followed by "…(N
// bytes)" when it is longer. Every validation error that repeats what a
// caller sent goes through Quote or Truncate.
func Quote(input string) string {
	cut, ok := cutAt(input)
	if ok {
		return strconv.Quote(input)
	}
	return strconv.Quote(input[:cut]) + elided(len(input))
}

// Truncate is Quote without the quotes, for input that is already part of a
// longer rendering, such as an ID in a log line: input unchanged when it has
// at most MaxQuoted bytes, otherwise its first MaxQuoted bytes and "…(N
// bytes)".
func Truncate(input string) string {
	cut, ok := cutAt(input)
	if ok {
		return input
	}
	return input[:cut] + elided(len(input))
}

// cutAt returns where to cut input, and true when it needs no cut.
func cutAt(input string) (int, bool) {
	if len(input) <= MaxQuoted {
		return len(input), true
	}
	cut := MaxQuoted
	// Back up to the start of a character (at most utf8.UTFMax-1 bytes);
	// input that is not UTF-8 is cut where it is.
	for i := 0; i < utf8.UTFMax-1 && cut > 0 && !utf8.RuneStart(input[cut]); i++ {
		cut--
	}
	return cut, false
}

func elided(n int) string {
	return "…(" + strconv.Itoa(n) + " bytes)"
}
