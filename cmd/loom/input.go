package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/loomrt/loom/server"
)

// The bounds on what apply, delete -f and write read. The CLI holds every
// resource of its files until the server has checked them all, so input
// the server would refuse is refused before it is read whole.
const (
	// defaultMaxInputBytes is -max-input-bytes' default: the most bytes
	// read from all the files together.
	defaultMaxInputBytes = 64 << 20

	// documentTextPerResourceByte bounds the text of one document: a
	// document longer than this many times -max-resource-bytes is refused
	// as it is read, before it is decoded. YAML or JSON text is a few times
	// its resource's encoding at most (base64 is 4/3, quoting and
	// indentation rarely more), so no document the server could store is
	// refused.
	documentTextPerResourceByte = 16
)

// inputLimits are the bounds of one command's input.
type inputLimits struct {
	input    int64 // bytes of all the files together (-max-input-bytes)
	resource int   // bytes of one resource's encoding (-max-resource-bytes)
}

func defaultInputLimits() inputLimits {
	return inputLimits{input: defaultMaxInputBytes, resource: server.DefaultMaxResourceBytes}
}

// addInputFlags adds -max-input-bytes and -max-resource-bytes to fs.
func addInputFlags(fs *flag.FlagSet) *inputLimits {
	lim := defaultInputLimits()
	fs.Int64Var(&lim.input, "max-input-bytes", lim.input,
		"most `bytes` read from all the files together; a larger input is refused before it is read whole")
	fs.IntVar(&lim.resource, "max-resource-bytes", lim.resource,
		fmt.Sprintf("largest resource sent, in `bytes` of its encoding: the server's -max-resource-bytes. A larger one, or a document whose text is over %d times this, is refused before anything is sent", documentTextPerResourceByte))
	return &lim
}

// check refuses limits that would refuse everything.
func (lim inputLimits) check() error {
	if lim.input <= 0 || lim.resource <= 0 {
		return usagef("-max-input-bytes and -max-resource-bytes must be positive")
	}
	return nil
}

func (lim inputLimits) documentBytes() int64 {
	return int64(lim.resource) * documentTextPerResourceByte
}

func (lim inputLimits) inputError(name string) error {
	return fmt.Errorf("%s: the input is over -max-input-bytes (%d bytes, all files together): nothing was sent; apply fewer files at once, or raise the limit", name, lim.input)
}

func (lim inputLimits) documentError(where string) error {
	return fmt.Errorf("%s: the document is over %d bytes of text (%d times -max-resource-bytes), too large for a resource the server stores: nothing was sent",
		where, lim.documentBytes(), documentTextPerResourceByte)
}

func (lim inputLimits) resourceError(where string, size int) error {
	return fmt.Errorf("%s: the resource encodes to %d bytes, over -max-resource-bytes (%d): the server would refuse it; nothing was sent (raise -max-resource-bytes if the server's is higher)",
		where, size, lim.resource)
}

// overLimit says which limit stopped an inputReader.
type overLimit int

const (
	withinLimits overLimit = iota
	overInput
	overDocument
)

var errOverLimit = errors.New("input over the limit")

// inputReader reads one input, counting what it reads against the bytes
// all inputs may still take (*left) and against the current document's
// limit (docRead is reset as each document starts). It reads at most one
// byte past either, and then fails, saying which in over.
type inputReader struct {
	r        io.Reader
	left     *int64
	docRead  int64
	docLimit int64
	over     overLimit
}

func (r *inputReader) Read(p []byte) (int, error) {
	if r.over != withinLimits {
		return 0, errOverLimit
	}
	if most := min(*r.left, r.docLimit-r.docRead) + 1; int64(len(p)) > most {
		p = p[:most]
	}
	n, err := r.r.Read(p)
	*r.left -= int64(n)
	r.docRead += int64(n)
	switch {
	case *r.left < 0:
		r.over = overInput
		return n, errOverLimit
	case r.docRead > r.docLimit:
		r.over = overDocument
		return n, errOverLimit
	}
	return n, err
}
