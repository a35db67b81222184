// Package testlog holds what tests use to read a logger's output while the
// code under test still writes it.
package testlog

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that a logger may write from any goroutine while
// a test reads it. The zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
