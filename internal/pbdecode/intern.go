package pbdecode

import (
	"sync"

	"github.com/loomrt/loom/proto/pbresource"
)

// maxInterned bounds how many distinct Types and Tenancies an interner
// keeps; beyond it, resources get their own.
const maxInterned = 4096

// interner hands out one Type message per distinct Type and one Tenancy
// per distinct Tenancy. The messages it returns are shared and must never
// change (cached resources are immutable, see the resource package doc).
type interner struct {
	mu        sync.Mutex
	types     map[[3]string]*pbresource.Type
	tenancies map[[2]string]*pbresource.Tenancy
}

func (in *interner) typ(k [3]string) *pbresource.Type {
	in.mu.Lock()
	defer in.mu.Unlock()
	if t, ok := in.types[k]; ok {
		return t
	}
	t := &pbresource.Type{Group: k[0], GroupVersion: k[1], Kind: k[2]}
	if in.types == nil {
		in.types = make(map[[3]string]*pbresource.Type)
	}
	if len(in.types) < maxInterned {
		in.types[k] = t
	}
	return t
}

func (in *interner) tenancy(k [2]string) *pbresource.Tenancy {
	in.mu.Lock()
	defer in.mu.Unlock()
	if t, ok := in.tenancies[k]; ok {
		return t
	}
	t := &pbresource.Tenancy{Partition: k[0], Namespace: k[1]}
	if in.tenancies == nil {
		in.tenancies = make(map[[2]string]*pbresource.Tenancy)
	}
	if len(in.tenancies) < maxInterned {
		in.tenancies[k] = t
	}
	return t
}
