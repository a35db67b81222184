package etcd

import (
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/proto/pbresource"
)

// Decoding is most of what a List, a WatchList snapshot or a watch event
// costs on top of etcd itself (see the W9 results in docs/performance.md):
// the generic protobuf decoder makes some two dozen allocations for a small
// resource. unmarshalResource decodes the fields a stored resource has by
// hand instead, into one block of messages and one string that all its
// string fields share, and hands anything unusual to the generic decoder,
// so its results are always the generic decoder's (codec_test.go checks
// that, with a fuzz test).

// decodedBlock holds the fixed-size messages of one decoded resource, so
// they cost one allocation.
type decodedBlock struct {
	res          pbresource.Resource
	id           pbresource.ID
	idType       pbresource.Type
	idTenancy    pbresource.Tenancy
	owner        pbresource.ID
	ownerType    pbresource.Type
	ownerTenancy pbresource.Tenancy
	data         anypb.Any
}

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
	blk := new(decodedBlock)
	r := fieldReader{s: string(b), buf: b}
	res := &blk.res
	var seen uint8
	for {
		num, typ, more, bad := r.next()
		if bad {
			return nil, false
		}
		if !more {
			return res, true
		}
		if num < 1 || num > 7 || typ != protowire.BytesType {
			return nil, false
		}
		if num != 5 && num != 6 {
			// Singular fields appear once in what the backend writes.
			if seen&(1<<num) != 0 {
				return nil, false
			}
			seen |= 1 << num
		}
		var ok bool
		switch num {
		case 1:
			res.Id = &blk.id
			ok = readID(&r, res.Id, &blk.idType, &blk.idTenancy)
		case 2:
			res.Owner = &blk.owner
			ok = readID(&r, res.Owner, &blk.ownerType, &blk.ownerTenancy)
		case 3:
			res.Version, ok = r.str()
		case 4:
			res.Generation, ok = r.str()
		case 5:
			ok = readMetadata(&r, res)
		case 6:
			ok = readStatus(&r, res)
		case 7:
			res.Data = &blk.data
			ok = readAny(&r, res.Data)
		}
		if !ok {
			return nil, false
		}
	}
}

func readID(parent *fieldReader, id *pbresource.ID, typ *pbresource.Type, ten *pbresource.Tenancy) bool {
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
		if num < 1 || num > 4 || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		switch num {
		case 1:
			id.Uid, ok = r.str()
		case 2:
			id.Name, ok = r.str()
		case 3:
			id.Type = typ
			ok = readStrings(&r, &typ.Group, &typ.GroupVersion, &typ.Kind)
		case 4:
			id.Tenancy = ten
			ok = readStrings(&r, &ten.Partition, &ten.Namespace, nil)
		}
		if !ok {
			return false
		}
	}
}

// readStrings reads a message of up to three string fields (numbers 1 to 3)
// into f1, f2, f3 (nil: the field must not be there).
func readStrings(parent *fieldReader, f1, f2, f3 *string) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	fields := [4]*string{nil, f1, f2, f3}
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			return true
		}
		if num < 1 || num > 3 || fields[num] == nil || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		if *fields[num], ok = r.str(); !ok {
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
		if num < 1 || num > 2 || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		if num == 1 {
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
		if num < 1 || num > 2 || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		if num == 1 {
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
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return false
		}
		if !more {
			return true
		}
		if num < 1 || num > 2 || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return false
		}
		seen |= 1 << num
		if num == 1 {
			if a.TypeUrl, ok = r.str(); !ok {
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
