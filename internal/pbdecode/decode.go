// Package pbdecode decodes resources and watch events without the generic
// protobuf machinery. The generic decoder makes some two dozen allocations
// for a small resource; this one decodes the fields a resource has into one
// internal/pblayout block (and one per status) whose strings all share one
// allocation (for watch events) or the input (for stored resources), and
// hands anything unusual to the generic decoder, so its results are always
// the generic decoder's (decode_test.go checks that, with fuzz tests). The
// field numbers, the Go fields they fill and the blocks come from
// internal/pblayout. The etcd backend decodes stored resources with
// Resource, and the many of a range read with RangeDecoder; a Manager's
// cache decodes remote WatchList streams with Codec.
package pbdecode

import (
	"strings"
	"sync"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
)

// maxField is the highest field number the decoder's seen-bitmasks track: a
// message with a higher one (from a newer resource.proto) takes the generic
// decoder.
const maxField = 7

// Resource decodes an encoded Resource. Its strings and its Data.Value
// share b, which must not change afterwards: the resource keeps b alive,
// no more than its own copies of the strings would weigh, and nothing is
// copied.
func Resource(b []byte) (*pbresource.Resource, error) {
	r := fieldReader{s: unsafe.String(unsafe.SliceData(b), len(b)), buf: b}
	if res, ok := fastResource(&r, nil); ok {
		return res, nil
	}
	res := new(pbresource.Resource)
	if err := proto.Unmarshal(b, res); err != nil {
		return nil, err
	}
	return res, nil
}

// Decoder decodes the watch events of one stream. The resources it decodes
// share their Type and Tenancy messages with the stream's other resources
// of the same Type and Tenancy, so they must never change (as everything
// cached or sent on a watch, see the resource package doc). Each keeps its
// other strings and its Data.Value in one allocation of their exact size.
// It is safe for concurrent use.
type Decoder struct {
	mu  sync.Mutex
	in  interner
	fix fixups
}

// WatchEvent decodes an encoded WatchEvent into ev. It keeps nothing of b.
func (d *Decoder) WatchEvent(b []byte, ev *pbresource.WatchEvent) error {
	ev.Reset()
	if d.fastWatchEvent(b, ev) {
		return nil
	}
	return proto.Unmarshal(b, ev)
}

// fastWatchEvent decodes b into ev when it holds exactly one event field;
// false means ev may be half-filled and the generic decoder must run.
func (d *Decoder) fastWatchEvent(b []byte, ev *pbresource.WatchEvent) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.fix.reset()
	defer d.fix.reset() // keeps nothing of b, nor of ev
	// The views of b the fixups collect are copied by finish, before this
	// returns.
	r := fieldReader{s: unsafe.String(unsafe.SliceData(b), len(b)), buf: b, fix: &d.fix}
	num, typ, more, bad := r.next()
	if bad || !more || typ != protowire.BytesType {
		return false
	}
	sub, ok := r.sub()
	if !ok || r.pos != len(r.buf) {
		return false // a second field merges with the first: the generic decoder knows how
	}
	if num == pblayout.WatchEventEndOfSnapshot {
		version, ok := onlyVersion(&sub, pblayout.EndOfSnapshotVersion)
		if !ok {
			return false
		}
		ev.Event = &pbresource.WatchEvent_EndOfSnapshot_{EndOfSnapshot: &pbresource.WatchEvent_EndOfSnapshot{Version: version}}
		return true
	}
	if num == pblayout.WatchEventBookmark {
		version, ok := onlyVersion(&sub, pblayout.BookmarkVersion)
		if !ok {
			return false
		}
		ev.Event = &pbresource.WatchEvent_Bookmark_{Bookmark: &pbresource.WatchEvent_Bookmark{Version: version}}
		return true
	}
	if num == pblayout.WatchEventNewSnapshot {
		if len(sub.buf) != 0 {
			return false
		}
		ev.Event = &pbresource.WatchEvent_NewSnapshot_{NewSnapshot: &pbresource.WatchEvent_NewSnapshot{}}
		return true
	}
	if num != pblayout.WatchEventUpsert && num != pblayout.WatchEventDelete {
		return false
	}
	var res *pbresource.Resource
	var version string
	if len(sub.buf) > 0 {
		num, typ, _, bad := sub.next()
		if bad || num != pblayout.EventResource || typ != protowire.BytesType {
			return false
		}
		rr, ok := sub.sub()
		if !ok {
			return false
		}
		if sub.pos != len(sub.buf) {
			// A Delete's version may follow its resource.
			if num == pblayout.WatchEventUpsert {
				return false
			}
			if version, ok = onlyVersion(&sub, pblayout.DeleteVersion); !ok || version == "" {
				return false
			}
		}
		if res, ok = fastResource(&rr, &d.in); !ok {
			return false
		}
	}
	d.fix.finish()
	if num == pblayout.WatchEventUpsert {
		// The oneof case and its message in one allocation.
		u := new(upsertEvent)
		u.upsert.Resource = res
		u.event.Upsert = &u.upsert
		ev.Event = &u.event
	} else {
		ev.Event = &pbresource.WatchEvent_Delete_{Delete: &pbresource.WatchEvent_Delete{Resource: res, Version: version}}
	}
	return true
}

// upsertEvent is an Upsert event's oneof case and message.
type upsertEvent struct {
	event  pbresource.WatchEvent_Upsert_
	upsert pbresource.WatchEvent_Upsert
}

// onlyVersion reads what is left of r: nothing, or the string field num
// alone, once. It copies the string (events' versions are few and short).
func onlyVersion(r *fieldReader, num protowire.Number) (string, bool) {
	if r.pos == len(r.buf) {
		return "", true
	}
	n, typ, _, bad := r.next()
	if bad || n != num || typ != protowire.BytesType {
		return "", false
	}
	v, ok := r.str()
	if !ok || r.pos != len(r.buf) {
		return "", false
	}
	return strings.Clone(v), true
}

// fastResource decodes the Resource r reads when it holds only the fields
// of a resource, once each; ok is false otherwise. With an interner the
// IDs share their Types and Tenancies through it.
func fastResource(r *fieldReader, in *interner) (*pbresource.Resource, bool) {
	var res *pbresource.Resource
	var blk *pblayout.Block
	var shared *pblayout.SharedBlock
	if in == nil {
		blk = new(pblayout.Block)
		res = &blk.Resource
	} else {
		shared = new(pblayout.SharedBlock)
		res = &shared.Resource
	}
	strs := pblayout.ResourceStrings(res)
	var seen uint8
	for {
		tag := r.pos
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
			// Singular fields appear once in what a server sends; a repeated
			// message field would merge, which the generic decoder does.
			if seen&(1<<num) != 0 {
				return nil, false
			}
			seen |= 1 << num
		}
		var ok bool
		switch num {
		case pblayout.ResourceID:
			if in == nil {
				ok = readID(r, blk.SetID())
			} else {
				ok = readSharedID(r, shared.SetID(), in)
			}
		case pblayout.ResourceOwner:
			if in == nil {
				ok = readID(r, blk.SetOwner())
			} else {
				res.Owner = new(pbresource.ID)
				ok = readSharedID(r, res.Owner, in)
			}
		case pblayout.ResourceMetadata:
			if in != nil && r.fix == nil {
				// Decoding a range (RangeDecoder): the resource shares
				// the metadata map of an earlier one with the same
				// entries.
				ok = res.Metadata == nil && readSharedMetadata(r, res, in, tag)
			} else {
				ok = readMetadata(r, res)
			}
		case pblayout.ResourceStatus:
			ok = readStatus(r, res, in)
		case pblayout.ResourceData:
			if in == nil {
				ok = readAny(r, blk.SetData())
			} else {
				ok = readAny(r, shared.SetData())
			}
		default:
			ok = readString(r, strs[:], num)
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
	v, ok := r.str()
	*strs[num] = v
	if r.fix != nil {
		r.fix.str(strs[num], v)
	}
	return ok
}

// readID reads an ID into blk, its Type and Tenancy included.
func readID(parent *fieldReader, blk *pblayout.IDBlock) bool {
	return readIDFields(parent, &blk.ID, blk, nil)
}

// readSharedID reads an ID into id, with its Type and Tenancy from in.
func readSharedID(parent *fieldReader, id *pbresource.ID, in *interner) bool {
	return readIDFields(parent, id, nil, in)
}

// readType reads a Type, from in if there is one and into a message of its
// own otherwise.
func readType(r *fieldReader, in *interner) (*pbresource.Type, bool) {
	if in == nil {
		t := new(pbresource.Type)
		s := pblayout.TypeStrings(t)
		return t, readStrings(r, s[:])
	}
	// The same encoding gives the same Type. A Decoder (r.fix set) reads
	// gRPC's buffer, which is reused: its keys are copies.
	return internRaw(r, &in.rawTypes, typeFields[:], in.typ, r.fix != nil)
}

// readTenancy reads a Tenancy, from in if there is one and into a message
// of its own otherwise.
func readTenancy(r *fieldReader, in *interner) (*pbresource.Tenancy, bool) {
	if in == nil {
		t := new(pbresource.Tenancy)
		s := pblayout.TenancyStrings(t)
		return t, readStrings(r, s[:])
	}
	return internRaw(r, &in.rawTenancies, tenancyFields[:], in.tenancy, r.fix != nil)
}

// typeFields and tenancyFields tell the string fields of a Type and a
// Tenancy by number (non-nil entries).
var (
	typeFields    = pblayout.TypeStrings(new(pbresource.Type))
	tenancyFields = pblayout.TenancyStrings(new(pbresource.Tenancy))
)

// readKeyFields reads a message of the string fields that fields marks,
// from the reader of the message itself, into an array indexed by field
// number. The strings are views of the input.
func readKeyFields(r *fieldReader, fields []*string) (key internKey, ok bool) {
	var seen uint8
	for {
		num, wt, more, bad := r.next()
		if bad {
			return key, false
		}
		if !more {
			return key, true
		}
		if num < 1 || int(num) >= len(fields) || fields[num] == nil || wt != protowire.BytesType || seen&(1<<num) != 0 {
			return key, false
		}
		seen |= 1 << num
		if key[num], ok = r.str(); !ok {
			return key, false
		}
	}
}

// readIDFields reads an ID into id, its Type and Tenancy into blk (whose
// ID id is) or, without a blk, from in.
func readIDFields(parent *fieldReader, id *pbresource.ID, blk *pblayout.IDBlock, in *interner) bool {
	r, ok := parent.sub()
	if !ok {
		return false
	}
	strs := pblayout.IDStrings(id)
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
		switch {
		case num == pblayout.IDType && blk != nil:
			t := pblayout.TypeStrings(blk.SetType())
			ok = readStrings(&r, t[:])
		case num == pblayout.IDType:
			id.Type, ok = readType(&r, in)
		case num == pblayout.IDTenancy && blk != nil:
			t := pblayout.TenancyStrings(blk.SetTenancy())
			ok = readStrings(&r, t[:])
		case num == pblayout.IDTenancy:
			id.Tenancy, ok = readTenancy(&r, in)
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
	if parent.fix != nil {
		parent.fix.metadata(res, k, v)
		return true
	}
	if res.Metadata == nil {
		res.Metadata = make(map[string]string, 4)
	}
	res.Metadata[k] = v
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
		if r.fix != nil {
			r.fix.value(&a.Value, a.Value)
		}
	}
}
