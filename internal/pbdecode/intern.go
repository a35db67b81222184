package pbdecode

import (
	"strings"

	"github.com/loomrt/loom/internal/pblayout"
	"github.com/loomrt/loom/proto/pbresource"
)

// maxInterned bounds how many distinct Types and Tenancies an interner
// keeps; beyond it, resources get their own.
const maxInterned = 4096

// interner hands out one Type message per distinct Type and one Tenancy
// per distinct Tenancy, with its own copies of the strings. The messages it
// returns are shared and must never change (cached resources are
// immutable, see the resource package doc). The Decoder's lock guards it;
// a RangeDecoder's is its own goroutine's.
type interner struct {
	types     map[internKey]*pbresource.Type
	tenancies map[internKey]*pbresource.Tenancy
	// Types and Tenancies are also found by their encoding (see
	// internRaw); a RangeDecoder's metadata maps by the encoding of their
	// entries (see readSharedMetadata). A RangeDecoder's keys are views of
	// the input, which the decoded resources keep anyway; a Decoder's are
	// copies (its input is gRPC's buffer, reused after each message).
	rawTypes     map[string]*pbresource.Type
	rawTenancies map[string]*pbresource.Tenancy
	meta         map[string]map[string]string
}

// internRaw reads the message field of string fields (a Type or a
// Tenancy: fields marks them) that r is at and returns the interned
// message, found first by its encoding in *raw, then by its fields
// through intern. A new key is a view of r's input, or a copy if
// copyKey.
func internRaw[M any](r *fieldReader, raw *map[string]*M, fields []*string, intern func(internKey) *M, copyKey bool) (*M, bool) {
	sub, ok := r.sub()
	if !ok {
		return nil, false
	}
	enc := sub.s[sub.base : sub.base+len(sub.buf)]
	if m, ok := (*raw)[enc]; ok {
		return m, true
	}
	k, ok := readKeyFields(&sub, fields)
	if !ok {
		return nil, false
	}
	m := intern(k)
	if len(*raw) < maxInterned {
		if *raw == nil {
			*raw = make(map[string]*M)
		}
		if copyKey {
			enc = strings.Clone(enc)
		}
		(*raw)[enc] = m
	}
	return m, true
}

// internKey holds a Type's or a Tenancy's strings by field number.
type internKey [4]string

func (in *interner) typ(k internKey) *pbresource.Type {
	if t, ok := in.types[k]; ok {
		return t
	}
	t := new(pbresource.Type)
	fields := pblayout.TypeStrings(t)
	k = cloneKey(k, fields[:])
	if in.types == nil {
		in.types = make(map[internKey]*pbresource.Type)
	}
	if len(in.types) < maxInterned {
		in.types[k] = t
	}
	return t
}

func (in *interner) tenancy(k internKey) *pbresource.Tenancy {
	if t, ok := in.tenancies[k]; ok {
		return t
	}
	t := new(pbresource.Tenancy)
	fields := pblayout.TenancyStrings(t)
	k = cloneKey(k, fields[:])
	if in.tenancies == nil {
		in.tenancies = make(map[internKey]*pbresource.Tenancy)
	}
	if len(in.tenancies) < maxInterned {
		in.tenancies[k] = t
	}
	return t
}

// cloneKey copies k's strings (views of an input) and sets the fields dst
// points at (a pblayout table) to them; it returns the copied key.
func cloneKey(k internKey, dst []*string) internKey {
	for i, p := range dst {
		k[i] = strings.Clone(k[i])
		if p != nil {
			*p = k[i]
		}
	}
	return k
}
