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

// NewULIDPair returns two new ULIDs, the second made after the first, with
// one reading of the clock and one allocation for both: what creating a
// resource takes (its Uid and its Generation).
func NewULIDPair() (first, second string) {
	var text [2 * ulid.EncodedSize]byte
	ulidMu.Lock()
	ms := ulid.Timestamp(time.Now())
	for i := range 2 {
		if err := ulidEntropy.MonotonicRead(ms, ulidNext[6:]); err != nil {
			ulidMu.Unlock()
			panic(err) // as NewULID
		}
		_ = ulidNext.SetTime(ms)
		_ = ulidNext.MarshalTextTo(text[i*ulid.EncodedSize : (i+1)*ulid.EncodedSize])
	}
	ulidMu.Unlock()
	both := string(text[:])
	return both[:ulid.EncodedSize], both[ulid.EncodedSize:]
}

// IsULID reports whether s is a well-formed ULID: what ulid.ParseStrict
// accepts, checked without decoding it (every write checks one or two).
func IsULID(s string) bool {
	if len(s) != ulid.EncodedSize || s[0] > '7' { // past '7' overflows 128 bits
		return false
	}
	for i := 0; i < len(s); i++ {
		if !ulidChars[s[i]] {
			return false
		}
	}
	return true
}

// ulidChars marks the bytes ulid.ParseStrict accepts in a ULID, taken from
// it: a byte is accepted if a ULID ending in it parses.
var ulidChars = func() (ok [256]bool) {
	text := []byte("0000000000000000000000000_")
	for c := range ok {
		text[len(text)-1] = byte(c)
		_, err := ulid.ParseStrict(string(text))
		ok[c] = err == nil
	}
	return ok
}()
