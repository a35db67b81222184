package resource

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

var (
	// ulidMu guards the generator's state: the monotonic entropy and the
	// ULID being made.
	ulidMu      sync.Mutex
	ulidEntropy = ulid.Monotonic(rand.Reader, 0)
	// ulidNext is where NewULID makes each ULID. The entropy source writes
	// through an io.Reader, which would move a local array to the heap on
	// every call; this one is allocated once.
	ulidNext ulid.ULID
)

// NewULID returns a new ULID string. ULIDs made by one process sort in the
// order they were made, even within one millisecond.
func NewULID() string {
	var text [ulid.EncodedSize]byte
	ulidMu.Lock()
	ms := ulid.Timestamp(time.Now()) // under the lock: the order of making is the order of times
	if err := ulidEntropy.MonotonicRead(ms, ulidNext[6:]); err != nil {
		ulidMu.Unlock()
		panic(err) // as ulid.MustNew: the entropy ran out within one millisecond
	}
	_ = ulidNext.SetTime(ms) // fails only after the year 10889
	_ = ulidNext.MarshalTextTo(text[:])
	ulidMu.Unlock()
	return string(text[:]) // the only allocation
}

// IsULID reports whether s is a well-formed ULID.
func IsULID(s string) bool {
	_, err := ulid.ParseStrict(s)
	return err == nil
}
