package pbdecode

import (
	"unsafe"

	"github.com/loomrt/loom/proto/pbresource"
)

// fixups collects, while a WatchEvent is decoded, the strings and bytes the
// decoded messages keep, as views of the input (which the caller reuses).
// finish then copies them into one exact-size allocation, the arena, and
// points the messages at it: the messages keep what they need, not the
// whole encoding (tags, lengths, the shared Types and Tenancies).
type fixups struct {
	strs   []strFix
	values []valueFix
	meta   []metaFix
	status []statusFix
	size   int
}

type strFix struct {
	dst *string
	src string // a view of the input
}

type valueFix struct {
	dst *[]byte
	src []byte // a view of the input
}

// metaFix and statusFix are map entries, added in order once their keys
// (and values) are in the arena.
type metaFix struct {
	res  *pbresource.Resource
	k, v string
}

type statusFix struct {
	res *pbresource.Resource
	k   string
	st  *pbresource.Status
}

func (f *fixups) reset() {
	clear(f.strs)
	clear(f.values)
	clear(f.meta)
	clear(f.status)
	f.strs, f.values, f.meta, f.status = f.strs[:0], f.values[:0], f.meta[:0], f.status[:0]
	f.size = 0
}

func (f *fixups) str(dst *string, src string) {
	f.strs = append(f.strs, strFix{dst, src})
	f.size += len(src)
}

func (f *fixups) value(dst *[]byte, src []byte) {
	f.values = append(f.values, valueFix{dst, src})
	f.size += len(src)
}

func (f *fixups) metadata(res *pbresource.Resource, k, v string) {
	f.meta = append(f.meta, metaFix{res, k, v})
	f.size += len(k) + len(v)
}

func (f *fixups) statusEntry(res *pbresource.Resource, k string, st *pbresource.Status) {
	f.status = append(f.status, statusFix{res, k, st})
	f.size += len(k)
}

// finish copies what the fixups hold into the arena and points the
// messages at it.
func (f *fixups) finish() {
	arena := make([]byte, 0, f.size)
	put := func(src string) string {
		if src == "" {
			return ""
		}
		off := len(arena)
		arena = append(arena, src...)
		// The arena is never written again except by appends past off, so
		// the string is immutable. (Its capacity is exact: appends do not
		// move it; had they, the earlier strings would keep the old copy.)
		return unsafe.String(&arena[off], len(src))
	}
	for _, s := range f.strs {
		*s.dst = put(s.src)
	}
	for _, m := range f.meta {
		if m.res.Metadata == nil {
			m.res.Metadata = make(map[string]string, 4)
		}
		m.res.Metadata[put(m.k)] = put(m.v)
	}
	for _, s := range f.status {
		if s.res.Status == nil {
			s.res.Status = make(map[string]*pbresource.Status, 2)
		}
		s.res.Status[put(s.k)] = s.st
	}
	// Data.Value last: a []byte the caller could write to, it covers bytes
	// no string does; a full slice expression keeps appends to it out of
	// the strings.
	for _, v := range f.values {
		off := len(arena)
		arena = append(arena, v.src...)
		*v.dst = arena[off:len(arena):len(arena)]
	}
}
