package etcd

import (
	"cmp"
	"errors"
	"fmt"
	"strings"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// The key space under the backend's prefix P (default "/loom"):
//
//	P/r/<group>/<kind>/<partition>/<namespace>/<name>
//	    the resource: its deterministic protobuf encoding, Version left out
//	    (the key's mod revision is the Version)
//	P/o/<owner group>/<owner kind>/<owner partition>/<owner namespace>/<owner name>/<owner uid>/<group>/<kind>/<partition>/<namespace>/<name>
//	    the owner index: one key per owned resource, its value the owned
//	    resource's ID (protobuf)
//
// and, when history is kept, the history keys P/h/, P/t/ and P/x/ (see
// history.go), outside the resource range the change feed watches.
//
// A resource and its index entry are written and deleted in the same
// transaction, so they never disagree. Types, tenancy units and names
// cannot contain "/" (they are DNS-label-like identifiers, see the resource
// package), so every segment is unambiguous; the backend rejects IDs that
// would break this rather than escape them.
//
// A resource of one type in one partition and namespace whose name starts
// with p lives in the key range with prefix P/r/<group>/<kind>/<partition>/
// <namespace>/<p>: List and WatchList with a fixed tenancy read exactly that
// range. With a wildcard partition they read the whole type
// (P/r/<group>/<kind>/) and filter by the decoded key; with a fixed
// partition and a wildcard namespace, the partition's range.
const (
	resourceDir = "/r/"
	ownerDir    = "/o/"
)

// errBadID is wrapped by the errors for IDs the key layout cannot hold.
var errBadID = errors.New("etcd: invalid resource id")

type keys struct {
	prefix string // without a trailing slash
}

// checkSegment rejects a key segment that would change the meaning of a key.
func checkSegment(what, s string) error {
	if strings.IndexByte(s, '/') >= 0 {
		return fmt.Errorf("%w: %s %q contains '/'", errBadID, what, s)
	}
	return nil
}

// checkID checks that id can be turned into keys.
func checkID(id *pbresource.ID) error {
	t := id.GetType()
	if t == nil {
		return fmt.Errorf("%w: the id and its type are required", errBadID)
	}
	ten := id.GetTenancy()
	for _, seg := range [...]struct{ what, s string }{
		{"group", t.Group}, {"kind", t.Kind}, {"partition", ten.GetPartition()},
		{"namespace", ten.GetNamespace()}, {"name", id.Name}, {"uid", id.Uid},
	} {
		if err := checkSegment(seg.what, seg.s); err != nil {
			return err
		}
	}
	if t.Group == "" || t.Kind == "" {
		return fmt.Errorf("%w: the type's group and kind are required", errBadID)
	}
	return nil
}

// path renders the type, tenancy and name of id: the part of a resource key
// after the directory.
func path(id *pbresource.ID) string {
	t, ten := id.GetType(), id.GetTenancy()
	return t.GetGroup() + "/" + t.GetKind() + "/" + ten.GetPartition() + "/" + ten.GetNamespace() + "/" + id.GetName()
}

func (k keys) resource(id *pbresource.ID) string { return k.prefix + resourceDir + path(id) }

// typePrefix is the prefix of every resource key of typ.
func (k keys) typePrefix(typ storage.UnversionedType) string {
	return k.prefix + resourceDir + typ.Group + "/" + typ.Kind + "/"
}

// ownerPart names one lifetime of an owner: its path and Uid. The owner's
// GroupVersion plays no part.
func ownerPart(owner *pbresource.ID) string {
	if owner == nil {
		return ""
	}
	return path(owner) + "/" + owner.GetUid()
}

// ownerPrefix is the prefix of the index keys of everything owner owns.
func (k keys) ownerPrefix(owner *pbresource.ID) string {
	return k.prefix + ownerDir + ownerPart(owner) + "/"
}

// ownerIndex is the index key saying that the resource id is owned by
// owner, or "" when owner is nil.
func (k keys) ownerIndex(owner, id *pbresource.ID) string {
	if owner == nil {
		return ""
	}
	return k.ownerPrefix(owner) + path(id)
}

// query is the part of a List or WatchList request that selects keys.
type query struct {
	typ                  storage.UnversionedType
	partition, namespace string
	namePrefix           string

	// rangePrefix is the key prefix to read or watch; exact says whether
	// every key under it matches (else keys are filtered with matches).
	rangePrefix string
	exact       bool
	// typeLen is the length of the type's prefix, where the tenancy part
	// of a key starts.
	typeLen int
	// empty is set when no key can match (a name prefix with a '/').
	empty bool
}

func (k keys) query(typ storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string) (query, error) {
	q := query{
		typ:        typ,
		partition:  tenancy.GetPartition(),
		namespace:  tenancy.GetNamespace(),
		namePrefix: namePrefix,
	}
	for _, seg := range [...]struct{ what, s string }{
		{"group", typ.Group}, {"kind", typ.Kind}, {"partition", q.partition}, {"namespace", q.namespace},
	} {
		if err := checkSegment(seg.what, seg.s); err != nil {
			return q, err
		}
	}
	if typ.Group == "" || typ.Kind == "" {
		return q, fmt.Errorf("%w: the type's group and kind are required", errBadID)
	}
	q.empty = strings.IndexByte(namePrefix, '/') >= 0
	base := k.typePrefix(typ)
	q.typeLen = len(base)
	switch {
	case q.partition == storage.Wildcard:
		q.rangePrefix = base
		q.exact = q.namespace == storage.Wildcard && namePrefix == ""
	case q.namespace == storage.Wildcard:
		q.rangePrefix = base + q.partition + "/"
		q.exact = namePrefix == ""
	default:
		q.rangePrefix = base + q.partition + "/" + q.namespace + "/" + namePrefix
		q.exact = true
	}
	return q, nil
}

// tenancyKey is a resource's place within its type, split from its key.
type tenancyKey struct {
	partition, namespace, name string
}

func compareTenancyKeys(a, b tenancyKey) int {
	if c := cmp.Compare(a.partition, b.partition); c != 0 {
		return c
	}
	if c := cmp.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	return cmp.Compare(a.name, b.name)
}

// split returns the partition, namespace and name of a resource key of the
// query's type.
func (q *query) split(key []byte) (tenancyKey, bool) {
	if len(key) < q.typeLen {
		return tenancyKey{}, false
	}
	rest := string(key[q.typeLen:])
	p, rest, ok1 := strings.Cut(rest, "/")
	ns, name, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 || strings.IndexByte(name, '/') >= 0 {
		return tenancyKey{}, false
	}
	return tenancyKey{partition: p, namespace: ns, name: name}, true
}

// matches reports whether a resource at tk is selected by the query.
func (q *query) matches(tk tenancyKey) bool {
	return (q.partition == storage.Wildcard || q.partition == tk.partition) &&
		(q.namespace == storage.Wildcard || q.namespace == tk.namespace) &&
		strings.HasPrefix(tk.name, q.namePrefix)
}
