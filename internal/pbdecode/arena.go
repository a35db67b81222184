package pbdecode

import (
	"encoding/binary"
	"strings"
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

	// sharedMeta holds metadata maps by the encoding of their entries
	// (metaKey), shared by the resources of a Decoder's stream whose
	// metadata is the same; key is scratch space for that encoding.
	sharedMeta map[string]map[string]string
	key        []byte
}

// Bounds of a Decoder's shared metadata maps: at most maxSharedMaps maps,
// each of entries encoded in at most maxSharedMetaKey bytes (so at most
// 256 KiB per stream).
const (
	maxSharedMaps    = 1024
	maxSharedMetaKey = 256
)

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

// shareMetadata gives each resource with metadata a map shared with the
// stream's earlier resources of the same metadata (maps held by the cache
// never change, see the resource package doc), and drops their entries
// from f.meta. Metadata it cannot share (too large, or the bound reached)
// stays for finish to copy.
func (f *fixups) shareMetadata() {
	kept := f.meta[:0]
	for i := 0; i < len(f.meta); {
		res := f.meta[i].res
		j, size := i, 0
		f.key = f.key[:0]
		for ; j < len(f.meta) && f.meta[j].res == res; j++ {
			m := f.meta[j]
			size += len(m.k) + len(m.v)
			f.key = binary.AppendUvarint(f.key, uint64(len(m.k)))
			f.key = append(f.key, m.k...)
			f.key = binary.AppendUvarint(f.key, uint64(len(m.v)))
			f.key = append(f.key, m.v...)
		}
		if shared, ok := f.sharedMeta[string(f.key)]; ok {
			res.Metadata = shared
			f.size -= size
		} else if len(f.key) <= maxSharedMetaKey && len(f.sharedMeta) < maxSharedMaps {
			shared := make(map[string]string, j-i)
			for _, m := range f.meta[i:j] {
				shared[strings.Clone(m.k)] = strings.Clone(m.v)
			}
			if f.sharedMeta == nil {
				f.sharedMeta = make(map[string]map[string]string)
			}
			f.sharedMeta[string(f.key)] = shared
			res.Metadata = shared
			f.size -= size
		} else {
			kept = append(kept, f.meta[i:j]...)
		}
		i = j
	}
	clear(f.meta[len(kept):])
	f.meta = kept
}

// finish copies what the fixups hold into the arena and points the
// messages at it.
func (f *fixups) finish() {
	f.shareMetadata()
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
