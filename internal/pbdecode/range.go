package pbdecode

import (
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
)

// maxSharedMetadata is the largest encoding of a resource's metadata whose
// map a RangeDecoder shares between resources.
const maxSharedMetadata = 1024

// RangeDecoder decodes the stored resources of one read of many (a List,
// a snapshot). Like Resource's, its resources share the bytes they were
// decoded from; besides, resources with equal Types, Tenancies or metadata
// share those messages and maps, so they must never change (as everything
// stored, see the resource package doc). It is not safe for concurrent use:
// decode on several goroutines with one RangeDecoder each.
type RangeDecoder struct {
	in interner
}

// Resource decodes an encoded Resource, which keeps b: b must not change
// afterwards. The decoder keeps views of b until it is dropped.
func (d *RangeDecoder) Resource(b []byte) (*pbresource.Resource, error) {
	r := fieldReader{s: unsafe.String(unsafe.SliceData(b), len(b)), buf: b}
	if res, ok := fastResource(&r, &d.in); ok {
		return res, nil
	}
	res := new(pbresource.Resource)
	if err := proto.Unmarshal(b, res); err != nil {
		return nil, err
	}
	return res, nil
}

// readSharedMetadata reads the metadata entries that follow one another
// from the one r is in (its tag at offset tag) into a map shared with the
// earlier resources whose entries were encoded the same way: a stored
// resource's entries are consecutive and sorted (a deterministic
// encoding), so equal metadata has equal bytes. The map and its interner
// key are views of r's input, which the resources keep anyway.
func readSharedMetadata(r *fieldReader, res *pbresource.Resource, in *interner, tag int) bool {
	// Find the end of the run of metadata entries.
	end := r.pos
	scan := *r
	scan.pos = tag
	for {
		at := scan.pos
		num, typ, more, bad := scan.next()
		if bad || !more || num != pblayout.ResourceMetadata || typ != protowire.BytesType {
			scan.pos = at
			break
		}
		if _, _, ok := scan.bytes(); !ok {
			return false
		}
		end = scan.pos
	}
	span := r.s[r.base+tag : r.base+end]
	if m, ok := in.meta[span]; ok {
		res.Metadata = m
		r.pos = end
		return true
	}
	// Read the entries as ever: the first through r, which is past its
	// tag, then the others.
	if !readMetadata(r, res) {
		return false
	}
	for r.pos < end {
		if _, _, _, bad := r.next(); bad || !readMetadata(r, res) {
			return false
		}
	}
	if len(span) <= maxSharedMetadata && len(in.meta) < maxInterned {
		if in.meta == nil {
			in.meta = make(map[string]map[string]string)
		}
		in.meta[span] = res.Metadata
	}
	return true
}
