package resource

import (
	"crypto/rand"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

var (
	ulidMu      sync.Mutex
	ulidEntropy = ulid.Monotonic(rand.Reader, 0)
)

// NewULID returns a new ULID string. ULIDs made by one process sort in the
// order they were made, even within one millisecond.
func NewULID() string {
	ulidMu.Lock()
	id := ulid.MustNew(ulid.Timestamp(time.Now()), ulidEntropy)
	ulidMu.Unlock()
	return id.String()
}

// IsULID reports whether s is a well-formed ULID.
func IsULID(s string) bool {
	_, err := ulid.ParseStrict(s)
	return err == nil
}
