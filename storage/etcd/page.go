package etcd

import (
	"context"
	"fmt"
	"strconv"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

var _ storage.PagedLister = (*Backend)(nil)

// ListPage returns one page of a listing consistent at req.Version
// (storage.PagedLister): a Range read at that etcd revision, from the key
// after req.After, with req.Limit as etcd's limit. The first page (empty
// Version) reads at the current revision and reports it. A revision etcd
// has compacted gives storage.ErrVersionGone.
//
// Pages follow etcd's key order (bytewise on partition/namespace/name),
// which differs from List's where a tenancy unit has a character below '/'
// (e.g. '-'). With a wildcard or a name prefix over several tenancies, the
// Range also returns keys the query does not select: they count against the
// limit, so a page may hold fewer resources than the limit while More is
// set.
func (b *Backend) ListPage(ctx context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string, req storage.PageRequest) (storage.Page, error) {
	rev, err := pageRevision(req.Version)
	if err != nil {
		return storage.Page{}, err
	}
	q, err := b.keys.query(resType, tenancy, namePrefix)
	if err != nil {
		return storage.Page{}, err
	}
	if rev == 0 && req.After == nil && req.Limit == 0 {
		// The whole listing now: List's, with its revision.
		if q.empty {
			return storage.Page{Version: strconv.FormatInt(b.seen.Load(), 10)}, nil
		}
		res, rev, err := b.readRange(ctx, storage.EventualConsistency, q)
		if err != nil {
			return storage.Page{}, err
		}
		return storage.Page{Resources: res, Version: strconv.FormatInt(rev, 10)}, nil
	}

	start := q.rangePrefix
	if req.After != nil {
		a := req.After
		for _, seg := range [...]string{a.Partition, a.Namespace, a.Name} {
			if err := checkSegment("page key", seg); err != nil {
				return storage.Page{}, err
			}
		}
		if k := b.keys.typePrefix(resType) + a.Partition + "/" + a.Namespace + "/" + a.Name + "\x00"; k > start {
			start = k
		}
	}
	opts := pageOptions(q.rangePrefix, rev, req.Limit)
	if q.empty {
		return storage.Page{Version: strconv.FormatInt(max(rev, b.seen.Load()), 10)}, nil
	}
	resp, err := b.get(ctx, storage.EventualConsistency, start, opts...)
	if err != nil {
		return storage.Page{}, pageReadError(err, rev)
	}
	if rev == 0 {
		rev = resp.Header.Revision
	}
	page := storage.Page{Version: strconv.FormatInt(rev, 10), More: resp.More}
	selected := resp.Kvs
	if !q.exact {
		selected = selected[:0:0]
		for _, kv := range resp.Kvs {
			if tk, ok := q.split(kv.Key); ok && q.matches(tk) {
				selected = append(selected, kv)
			}
		}
	}
	if page.Resources, err = decodeAll(selected); err != nil {
		return storage.Page{}, err
	}
	if page.More && len(resp.Kvs) > 0 {
		tk, ok := q.split(resp.Kvs[len(resp.Kvs)-1].Key)
		if !ok {
			return storage.Page{}, fmt.Errorf("etcd: unexpected key %q under the type's prefix", resp.Kvs[len(resp.Kvs)-1].Key)
		}
		page.Last = storage.PageKey{Partition: tk.partition, Namespace: tk.namespace, Name: tk.name}
	}
	return page, nil
}
