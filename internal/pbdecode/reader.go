package pbdecode

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// fieldReader walks the fields of one message. Strings are cut from s, the
// whole encoding as a string; buf is the same bytes as []byte (offset base
// into s). With fix set, s is a view of an input the caller reuses, and the
// strings and bytes the decoded messages keep go through fix.
type fieldReader struct {
	s    string
	buf  []byte
	base int // offset of buf[0] in s
	pos  int
	fix  *fixups
}

// next returns the next field's number and type; more is false at the end,
// bad is true on malformed input.
func (r *fieldReader) next() (num protowire.Number, typ protowire.Type, more, bad bool) {
	if r.pos >= len(r.buf) {
		return 0, 0, false, false
	}
	if b := r.buf[r.pos]; b < 0x80 && b >= 8 {
		// A one-byte tag (field numbers 1 to 15): most of them.
		r.pos++
		return protowire.Number(b >> 3), protowire.Type(b & 7), true, false
	}
	num, typ, n := protowire.ConsumeTag(r.buf[r.pos:])
	if n < 0 {
		return 0, 0, false, true
	}
	r.pos += n
	return num, typ, true, false
}

// bytes consumes a length-delimited field and returns its range in buf.
func (r *fieldReader) bytes() (start, end int, ok bool) {
	if r.pos < len(r.buf) {
		if l := int(r.buf[r.pos]); l < 0x80 {
			// A one-byte length: most fields.
			start, end = r.pos+1, r.pos+1+l
			if end > len(r.buf) {
				return 0, 0, false
			}
			r.pos = end
			return start, end, true
		}
	}
	v, n := protowire.ConsumeBytes(r.buf[r.pos:])
	if n < 0 {
		return 0, 0, false
	}
	start = r.pos + n - len(v)
	r.pos += n
	return start, start + len(v), true
}

// str consumes a string field, checking that it is UTF-8 as protobuf
// requires.
func (r *fieldReader) str() (string, bool) {
	start, end, ok := r.bytes()
	if !ok {
		return "", false
	}
	v := r.s[r.base+start : r.base+end]
	return v, utf8.ValidString(v)
}

// sub returns a reader over a message field.
func (r *fieldReader) sub() (fieldReader, bool) {
	start, end, ok := r.bytes()
	if !ok {
		return fieldReader{}, false
	}
	return fieldReader{s: r.s, buf: r.buf[start:end], base: r.base + start, fix: r.fix}, true
}

// varint consumes a varint field.
func (r *fieldReader) varint() (uint64, bool) {
	v, n := protowire.ConsumeVarint(r.buf[r.pos:])
	if n < 0 {
		return 0, false
	}
	r.pos += n
	return v, true
}
