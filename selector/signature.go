package selector

import "hash/maphash"

// Signature is a summary of a resource's metadata, 64 bits wide, against
// which MayMatch rules most non-matching resources out without reading
// their metadata: a store keeps one per resource and skips, in a selective
// listing, the resources whose signature cannot match. It is a Bloom filter
// of the metadata's keys (one bit each) and key-value pairs (two bits),
// valid within one process (its hash has a random seed).
type Signature uint64

// seed keys the signature's hash for the life of the process.
var seed = maphash.MakeSeed()

// SignatureOf returns the signature of metadata.
func SignatureOf(metadata map[string]string) Signature {
	var s Signature
	for k, v := range metadata {
		hk := maphash.String(seed, k)
		s |= keyBit(hk) | pairBits(hk, v)
	}
	return s
}

func keyBit(hk uint64) Signature { return 1 << (hk >> 58) }

// pairBits returns the two bits of a key-value pair, taken from the top and
// the middle of one mixed hash: two bits make it unlikely that the few
// pairs of a resource set those of another value by chance.
func pairBits(hk uint64, v string) Signature {
	h := (hk ^ maphash.String(seed, v)) * 0x9e3779b97f4a7c15
	return 1<<(h>>58) | 1<<((h>>26)&63)
}

// Prefilter is a selector's test of signatures, made once per listing by
// Selector.Prefilter.
type Prefilter struct {
	all Signature // bits every match has: its required keys and pairs
	// anyOf holds, per set requirement (in) of several values, the bits of
	// each value's pair, then a 0: a match has all the bits of one of them.
	anyOf []Signature
}

// Prefilter returns s's test of signatures. Only the requirements that need
// a key present (=, in, exists) can rule a resource out.
func (s Selector) Prefilter() Prefilter {
	var p Prefilter
	for _, r := range s.reqs {
		if r.Op != Equals && r.Op != In && r.Op != Exists {
			continue
		}
		hk := maphash.String(seed, r.Key)
		p.all |= keyBit(hk)
		switch {
		case r.Op == Equals || (r.Op == In && len(r.Values) == 1):
			p.all |= pairBits(hk, r.Values[0])
		case r.Op == In:
			for _, v := range r.Values {
				p.anyOf = append(p.anyOf, pairBits(hk, v))
			}
			p.anyOf = append(p.anyOf, 0) // ends the requirement's values
		}
	}
	return p
}

// Selective reports whether p can rule anything out.
func (p Prefilter) Selective() bool { return p.all != 0 || len(p.anyOf) > 0 }

// MayMatch reports whether a resource whose metadata has signature sig may
// match the selector: false means it does not; true means Matches must
// decide.
func (p Prefilter) MayMatch(sig Signature) bool {
	if sig&p.all != p.all {
		return false
	}
	found := false
	for _, bits := range p.anyOf {
		switch {
		case bits == 0: // the end of a requirement
			if !found {
				return false
			}
			found = false
		case sig&bits == bits:
			found = true
		}
	}
	return true
}
