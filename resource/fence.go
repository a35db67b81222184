package resource

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FenceMetadataKey is the gRPC metadata key with which a caller of Write,
// WriteStatus or Delete asks the server to fence the write: to make it only
// if the leadership term the value names still holds (see
// storage.Fence). The value is FormatFence's rendering of the term. The
// controller Manager sets it on the writes of singleton controllers when
// its lease gives fencing tokens; a backend that cannot fence ignores it.
const FenceMetadataKey = "x-loom-fence"

// FormatFence renders a fencing token, the leader key and the revision
// that created it, as the value of FenceMetadataKey: "<revision>@<key>".
// The revision comes first because the key may contain '@'.
func FormatFence(key string, revision int64) string {
	return strconv.FormatInt(revision, 10) + "@" + key
}

// ParseFence reads a value of FenceMetadataKey.
func ParseFence(value string) (key string, revision int64, err error) {
	revText, key, ok := strings.Cut(value, "@")
	if !ok || key == "" {
		return "", 0, errors.New("want <revision>@<key>")
	}
	revision, err = strconv.ParseInt(revText, 10, 64)
	if err != nil || revision <= 0 {
		return "", 0, fmt.Errorf("revision %s is not a positive integer", Quote(revText))
	}
	return key, revision, nil
}
