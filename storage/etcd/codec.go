package etcd

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
)

// Decoding is most of what a List, a WatchList snapshot or a watch event
// costs on top of etcd itself (see the W9 results in docs/performance.md):
// the generic protobuf decoder makes some two dozen allocations for a small
// resource. unmarshalResource decodes the fields a stored resource has by
// hand instead, into one block of messages and one string that all its
// string fields share, and hands anything unusual to the generic decoder,
// so its results are always the generic decoder's (codec_test.go checks
// that, with a fuzz test). The field numbers, the Go fields they fill and
// the block come from internal/pblayout, the one description of that layout
// (resource.Clone shares it). Only the decoding changes here, never the
// encoding: what etcd holds is the standard protobuf encoding of a Resource
// (backend.go's marshalOptions), so data stored by any version decodes.

// maxField is the highest field number the decoder's seen-bitmasks track: a
// message with a higher one (from a newer resource.proto) takes the generic
// decoder.
const maxField = 7

// unmarshalResource decodes a stored resource. The result's Data.Value
// shares b's memory; b must not change afterwards.
func unmarshalResource(b []byte) (*pbresource.Resource, error) {
	if res, ok := fastUnmarshal(b); ok {
		return res, nil
	}
	res := new(pbresource.Resource)
	if err := proto.Unmarshal(b, res); err != nil {
		return nil, err
	}
	return res, nil
}

// fieldReader walks the fields of one message. Strings are cut from s, a
// copy of the whole encoding made once; buf is the same bytes as []byte
// (offset base into s).
type fieldReader struct {
	s    string
	buf  []byte
	base int // offset of buf[0] in s
	pos  int
}

// next returns the next field's number and type, false at the end or on
// malformed input (then ok is false and bad is true).
func (r *fieldReader) next() (num protowire.Number, typ protowire.Type, more, bad bool) {
	if r.pos >= len(r.buf) {
		return 0, 0, false, false
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
	return fieldReader{s: r.s, buf: r.buf[start:end], base: r.base + start}, true
}

// fastUnmarshal decodes b when it holds only what the backend writes,
// once each; ok is false otherwise, and the caller uses proto.Unmarshal.
func fastUnmarshal(b []byte) (*pbresource.Resource, bool) {
	blk := new(pblayout.Block)
	r := fieldReader{s: string(b), buf: b}
	res := &blk.Resource
	strs := pblayout.ResourceStrings(res)
	var seen uint8
	for {
		num, typ, more, bad := r.next()
		if bad {
			return nil, false
		}
		if !more {
			return res, true
		}
		if num < 1 || num > maxField || typ != protowire.BytesType {
			return nil, false
		}
		if num != pblayout.ResourceMetadata && num != pblayout.ResourceStatus {
			// Singular fields appear once in what the backend writes.
			if seen&(1<<num) != 0 {
				return nil, false
			}
			seen |= 1 << num
		}
		var ok bool
		switch num {
		case pblayout.ResourceID:
			ok = readID(&r, blk.SetID())
		case pblayout.ResourceOwner:
			ok = readID(&r, blk.SetOwner())
		case pblayout.ResourceMetadata:
			ok = readMetadata(&r, res)
		case pblayout.ResourceStatus:
			ok = readStatus(&r, res)
		case pblayout.ResourceData:
			ok = readAny(&r, blk.SetData())
		default:
			ok = readString(&r, strs[:], num)
		}
		if !ok {
			return nil, false
		}
	}
}

// readString reads string field num into its entry of strs (a pblayout
// table); a number the table lacks is not a string field.
func readString(r *fieldReader, strs []*string, num protowire.Number) bool {
	if int(num) >= len(strs) || strs[num] == nil {
		return false
	}
	var ok bool
	*strs[num], ok = r.str()
	return ok
}

func readID(parent *fieldReader, blk *pblayout.IDBlock) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	strs := pblayout.IDStrings(&blk.ID)
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			return true
		}
		if num < 1 || num > maxField || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		switch num {
		case pblayout.IDType:
			t := pblayout.TypeStrings(blk.SetType())
			ok = readStrings(&r, t[:])
		case pblayout.IDTenancy:
			t := pblayout.TenancyStrings(blk.SetTenancy())
			ok = readStrings(&r, t[:])
		default:
			ok = readString(&r, strs[:], num)
		}
		if !ok {
			return false
		}
	}
}

// readStrings reads a message of string fields into strs (a pblayout
// table).
func readStrings(parent *fieldReader, strs []*string) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			return true
		}
		if num < 1 || num > maxField || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		if !readString(&r, strs, num) {
			return false
		}
	}
}

// readMetadata reads one map entry of the metadata.
func readMetadata(parent *fieldReader, res *pbresource.Resource) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	var k, v string
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			break
		}
		if (num != pblayout.MapKey && num != pblayout.MapValue) || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		if num == pblayout.MapKey {
			k, ok = r.str()
		} else {
			v, ok = r.str()
		}
		if !ok {
			return false
		}
	}
	if res.Metadata == nil {
		res.Metadata = make(map[string]string, 4)
	}
	res.Metadata[k] = v
	return true
}

// readStatus reads one map entry of the status, the Status message with the
// generic decoder.
func readStatus(parent *fieldReader, res *pbresource.Resource) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	var k string
	var st *pbresource.Status
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			break
		}
		if (num != pblayout.MapKey && num != pblayout.MapValue) || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		if num == pblayout.MapKey {
			if k, ok = r.str(); !ok {
				return false
			}
			continue
		}
		start, end, ok := r.bytes()
		if !ok {
			return false
		}
		st = new(pbresource.Status)
		if proto.Unmarshal(r.buf[start:end], st) != nil {
			return false
		}
	}
	if st == nil {
		st = new(pbresource.Status)
	}
	if res.Status == nil {
		res.Status = make(map[string]*pbresource.Status, 2)
	}
	res.Status[k] = st
	return true
}

func readAny(parent *fieldReader, a *anypb.Any) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	strs := pblayout.AnyStrings(a)
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			return true
		}
		if num < 1 || num > maxField || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		if num != pblayout.AnyValue {
			if !readString(&r, strs[:], num) {
				return false
			}
			continue
		}
		start, end, ok := r.bytes()
		if !ok {
			return false
		}
		// Share the caller's bytes; a full slice expression keeps appends
		// from writing past the field.
		a.Value = r.buf[start:end:end]
	}
}
