package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage"
)

// rangePageSize is how many keys the first request of a range read asks
// etcd for: a range of at most that many keys is one request, a larger one
// is read in pages at one revision (see readRange). Pages of 1,000 and
// 2,500 keys made W9's list-10k slower than one request, 5,000 faster (see
// docs/performance.md): every request costs a round trip, and etcd walks
// its index over the whole rest of the range to count it.
const rangePageSize = 5000

// maxRangePages bounds the number of pages after the first: a range too
// large for that many pages of rangePageSize is read in larger ones.
const maxRangePages = 4

// maxRangeRestarts is how many times readRange starts again, at a new
// revision, when etcd compacts the one it reads at between two pages.
const maxRangeRestarts = 3

// readRange returns the resources q selects, in List's order, and the etcd
// revision they are all read at. The first request reads the first
// rangePageSize keys with consistency and sets that revision; the next
// ones (at most maxRangePages) read the following keys at the same
// revision, each sent as soon as the previous one's answer is in, while
// that answer is decoded on another goroutine: decoding overlaps etcd's
// work and the transfer, and the pages decode on all cores. A page read
// from a member that does not have the revision yet is read from the
// leader (see get). When etcd compacts the revision between two pages, the
// read starts again at a new one, up to maxRangeRestarts times.
//
// The snapshot of a WatchList is a range read too: it can use readRange
// for its resources and their revision.
func (b *Backend) readRange(ctx context.Context, consistency storage.ReadConsistency, q query) ([]*pbresource.Resource, int64, error) {
	for restarts := 0; ; restarts++ {
		res, rev, err := b.readRangeOnce(ctx, consistency, q)
		if err == nil || !errors.Is(err, rpctypes.ErrCompacted) || ctx.Err() != nil {
			return res, rev, err
		}
		if restarts == maxRangeRestarts {
			return nil, 0, fmt.Errorf("etcd: compacted %d times while the range was read: %w", restarts+1, err)
		}
	}
}

// readRangeOnce is readRange without the restarts.
func (b *Backend) readRangeOnce(ctx context.Context, consistency storage.ReadConsistency, q query) ([]*pbresource.Resource, int64, error) {
	end := clientv3.GetPrefixRangeEnd(q.rangePrefix)
	resp, err := b.get(ctx, consistency, q.rangePrefix, clientv3.WithRange(end), clientv3.WithLimit(b.pageSize))
	if err != nil {
		return nil, 0, err
	}
	rev := resp.Header.Revision
	if !resp.More {
		res, err := q.collect(resp.Kvs)
		return res, rev, err
	}
	// The first answer counts the whole range: size the next pages to it.
	size := max(b.pageSize, (resp.Count-int64(len(resp.Kvs))+maxRangePages-1)/maxRangePages)
	var pages []*rangePage
	var g errgroup.Group
	for {
		p := &rangePage{kvs: resp.Kvs}
		pages = append(pages, p)
		g.Go(func() error { return q.decodePage(p) })
		if b.afterPage != nil {
			b.afterPage(rev)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		next := string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		resp, err = b.get(ctx, storage.EventualConsistency, next,
			clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(size))
		if err != nil {
			_ = g.Wait()
			return nil, 0, err
		}
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	return q.merge(pages), rev, nil
}

// rangePage is one page of a range read: its kvs, and once decoded the
// resources the query selects and (unless key order is List's) their
// tenancy keys.
type rangePage struct {
	kvs []*mvccpb.KeyValue
	res []*pbresource.Resource
	tks []tenancyKey
}

// keyOrdered reports whether etcd's key order is List's order for q's
// ranges, and every key in them is selected: one tenancy, no name prefix
// to filter.
func (q *query) keyOrdered() bool {
	return q.exact && q.partition != storage.Wildcard && q.namespace != storage.Wildcard
}

// decodePage decodes the kvs of p that q selects.
func (q *query) decodePage(p *rangePage) error {
	selected := p.kvs
	if !q.keyOrdered() {
		selected = p.kvs[:0:0]
		for _, kv := range p.kvs {
			tk, ok := q.split(kv.Key)
			if !ok || !q.matches(tk) {
				continue
			}
			p.tks = append(p.tks, tk)
			selected = append(selected, kv)
		}
	}
	var err error
	p.res, err = decodeAll(selected)
	return err
}

// merge returns the resources of pages, decoded, in List's order.
func (q *query) merge(pages []*rangePage) []*pbresource.Resource {
	n := 0
	for _, p := range pages {
		n += len(p.res)
	}
	if n == 0 {
		return nil
	}
	if q.keyOrdered() {
		out := make([]*pbresource.Resource, 0, n)
		for _, p := range pages {
			out = append(out, p.res...)
		}
		return out
	}
	type item struct {
		tk  tenancyKey
		res *pbresource.Resource
	}
	items := make([]item, 0, n)
	for _, p := range pages {
		for i, res := range p.res {
			items = append(items, item{tk: p.tks[i], res: res})
		}
	}
	// etcd orders keys bytewise, where "/" sorts after "-": namespace
	// "a-b" comes before namespace "a". Restore (partition, namespace,
	// name) order when that happened.
	cmpItems := func(x, y item) int { return compareTenancyKeys(x.tk, y.tk) }
	if !slices.IsSortedFunc(items, cmpItems) {
		slices.SortFunc(items, cmpItems)
	}
	out := make([]*pbresource.Resource, len(items))
	for i, it := range items {
		out[i] = it.res
	}
	return out
}

// collect decodes the kvs the query selects, in List's order.
func (q *query) collect(kvs []*mvccpb.KeyValue) ([]*pbresource.Resource, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	p := &rangePage{kvs: kvs}
	if err := q.decodePage(p); err != nil {
		return nil, err
	}
	return q.merge([]*rangePage{p}), nil
}
