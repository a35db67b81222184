package etcd

import (
	"context"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loomrt/loom/storage"
)

// pruneQueue bounds the names and types waiting for the pruner. Beyond
// it, a name is not queued but the next sweep looks at every name.
const pruneQueue = 4096

// pruneBatch is how many keys (or key prefixes) one pruning transaction
// deletes, well under etcd's default limit of 128 operations.
const pruneBatch = 96

// pruner enforces the history limits in the background (Start runs it):
// it counts the revisions updates recorded per name, and prunes a name to
// KeepVersions once it counted KeepVersions of them (slack), and every
// counted name every pruneDelay. So a name holds at most 2 × KeepVersions
// - 1 revisions per writing server, and more than KeepVersions for at
// most pruneDelay, while a pruning (a read and a transaction) serves up to
// KeepVersions writes: pruning after every write would cost etcd a read
// and a transaction per write (W9History). The types deletions were
// recorded in are queued too, and every type's trash is swept every
// sweepInterval, to TrashPerType and TrashRetention. Writes only count,
// never wait.
//
// Several servers on one etcd may prune the same keys at once. What one
// drops it finds past a bound at one revision, and it stays past it at any
// later one (newer revisions only push the oldest further out, and a key
// naming a Uid and Generation is never written again once pruned), so the
// deletes need no compare: deleting a key twice is harmless.
type pruner struct {
	b    *Backend
	wake chan struct{}

	mu       sync.Mutex
	names    map[string]int      // history prefixes of names: revisions counted
	types    map[string]struct{} // trash prefixes of types
	overflow bool                // a name was not queued

	// floors are where pruneName reads a name's history from; only the
	// goroutine of run touches them (see floor).
	floors map[string]floor
}

// floor is a history key at or below every kept key of a name, so that
// reading the name's history from it skips the keys pruned before: etcd
// walks deleted keys in a range until it compacts them, and a name updated
// often would otherwise make every pruning read longer than the last.
// History keys end in the lifetime's Uid and the version's Generation,
// ULIDs that grow with time, so a name's keys come in about the order they
// were written; a key written out of that order (a server whose clock is
// behind) below the floor would escape pruning, so every floorUses-th
// pruning of a name reads it whole and starts afresh.
type floor struct {
	key  string
	uses int
}

// floorUses is how many prunings of a name read from its floor before one
// reads the name's history whole.
const floorUses = 16

func newPruner(b *Backend) *pruner {
	return &pruner{b: b, wake: make(chan struct{}, 1), names: make(map[string]int), types: make(map[string]struct{}),
		floors: make(map[string]floor)}
}

// slack is how many revisions of a name the pruner counts before it
// prunes it.
func (p *pruner) slack() int { return max(1, p.b.hist.KeepVersions) }

// defaultPruneDelay is how long the pruner leaves a counted name before it
// prunes it, unless tests set Backend.pruneDelay.
const defaultPruneDelay = 10 * time.Second

// name counts a revision recorded under a name's history prefix.
func (p *pruner) name(prefix string) {
	if p.b.hist.KeepVersions < 0 {
		return
	}
	p.mu.Lock()
	n, ok := p.names[prefix]
	switch {
	case ok || len(p.names) < pruneQueue:
		n++
		p.names[prefix] = n
	default:
		p.overflow = true
	}
	p.mu.Unlock()
	if n >= p.slack() {
		p.signal()
	}
}

// trash queues a type's trash prefix.
func (p *pruner) trash(prefix string) {
	if p.b.hist.TrashPerType < 0 {
		return
	}
	p.mu.Lock()
	if len(p.types) < pruneQueue {
		p.types[prefix] = struct{}{}
	}
	p.mu.Unlock()
	p.signal()
}

func (p *pruner) signal() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run prunes until ctx ends.
func (p *pruner) run(ctx context.Context) {
	tick := time.NewTicker(p.b.hist.sweepInterval())
	defer tick.Stop()
	names := time.NewTicker(p.b.pruneDelay)
	defer names.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
			p.drain(ctx, p.slack())
		case <-names.C:
			p.drain(ctx, 1)
		case <-tick.C:
			p.drain(ctx, 1)
			p.sweep(ctx)
		}
	}
}

// drain prunes the queued types, and the names counted at least min
// times.
func (p *pruner) drain(ctx context.Context, min int) {
	p.mu.Lock()
	var names []string
	for prefix, n := range p.names {
		if n >= min {
			names = append(names, prefix)
			delete(p.names, prefix)
		}
	}
	types := p.types
	p.types = make(map[string]struct{})
	p.mu.Unlock()
	for _, prefix := range names {
		p.report(p.pruneName(ctx, prefix))
	}
	for prefix := range types {
		p.report(p.pruneTrash(ctx, prefix))
	}
}

func (p *pruner) report(err error) {
	if err != nil && !errorsIs(err, context.Canceled) {
		p.b.logger.Warn("pruning history", "error", err)
	}
}

// pruneName deletes the write revisions of a name beyond the newest
// KeepVersions.
func (p *pruner) pruneName(ctx context.Context, prefix string) error {
	keep := p.b.hist.KeepVersions
	from, f := prefix, p.floors[prefix]
	if f.key != "" && f.uses < floorUses {
		from = f.key
	} else {
		f = floor{}
	}
	resp, err := p.b.client.Get(ctx, from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend))
	if err != nil || len(resp.Kvs) <= keep {
		return err
	}
	var ops []clientv3.Op
	for _, kv := range resp.Kvs[keep:] {
		ops = append(ops, clientv3.OpDelete(string(kv.Key)))
	}
	if err := p.commit(ctx, ops); err != nil {
		return err
	}
	if keep > 0 {
		low := string(resp.Kvs[0].Key)
		for _, kv := range resp.Kvs[1:keep] {
			low = min(low, string(kv.Key))
		}
		p.setFloor(prefix, floor{key: low, uses: f.uses + 1})
	}
	return nil
}

// setFloor records a name's floor, forgetting another name's when there
// are pruneQueue of them.
func (p *pruner) setFloor(prefix string, f floor) {
	if _, ok := p.floors[prefix]; !ok && len(p.floors) >= pruneQueue {
		for other := range p.floors {
			delete(p.floors, other)
			break
		}
	}
	p.floors[prefix] = f
}

// commit applies ops in transactions of pruneBatch.
func (p *pruner) commit(ctx context.Context, ops []clientv3.Op) error {
	for len(ops) > 0 {
		n := min(len(ops), pruneBatch)
		if _, err := p.b.client.Txn(ctx).Then(ops[:n]...).Commit(); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// pruneTrash deletes the oldest deletion revisions of a type (its trash
// prefix) beyond TrashPerType or past TrashRetention, with the write
// revisions of their lifetimes.
func (p *pruner) pruneTrash(ctx context.Context, prefix string) error {
	lim := p.b.hist
	count, err := p.b.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return err
	}
	n, rev := count.Count, count.Header.Revision
	var minRev int64
	for {
		resp, err := p.b.client.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev),
			clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortAscend),
			clientv3.WithMinModRev(minRev), clientv3.WithLimit(pruneBatch/3))
		if err != nil {
			return err
		}
		now := time.Now()
		var ops []clientv3.Op
		for _, kv := range resp.Kvs {
			r, err := decodeRecord(kv, true)
			if err != nil {
				return err
			}
			if !(lim.TrashPerType > 0 && n > int64(lim.TrashPerType)) && !lim.expired(r.Time, now) {
				return p.commit(ctx, ops)
			}
			n--
			ops = append(ops, p.dropOps(string(kv.Key), r)...)
		}
		if err := p.commit(ctx, ops); err != nil || !resp.More || len(resp.Kvs) == 0 {
			return err
		}
		minRev = resp.Kvs[len(resp.Kvs)-1].ModRevision + 1
	}
}

// dropOps returns the deletes of a trash key holding r, its owner-index
// copy and its lifetime's write revisions.
func (p *pruner) dropOps(trashKey string, r storage.Revision) []clientv3.Op {
	k := p.b.keys
	rest := strings.TrimPrefix(trashKey, k.prefix+trashDir) // <path>/<uid>
	ops := []clientv3.Op{
		clientv3.OpDelete(trashKey),
		clientv3.OpDelete(k.prefix+historyDir+rest+"/", clientv3.WithPrefix()),
	}
	if o := r.Resource.Owner; o != nil && o.Uid != "" {
		ops = append(ops, clientv3.OpDelete(k.ownerTrashPrefix(o.Uid)+rest))
	}
	return ops
}

// sweep prunes the trash of every type, and when names were not queued,
// every name.
func (p *pruner) sweep(ctx context.Context) {
	k := p.b.keys
	dir := k.prefix + trashDir
	end := clientv3.GetPrefixRangeEnd(dir)
	for from := dir; ctx.Err() == nil; {
		resp, err := p.b.client.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
		if err != nil || len(resp.Kvs) == 0 {
			p.report(err)
			break
		}
		group, rest, _ := strings.Cut(strings.TrimPrefix(string(resp.Kvs[0].Key), dir), "/")
		kind, _, _ := strings.Cut(rest, "/")
		typePrefix := k.trashTypePrefix(storage.UnversionedType{Group: group, Kind: kind})
		p.report(p.pruneTrash(ctx, typePrefix))
		from = clientv3.GetPrefixRangeEnd(typePrefix)
	}

	p.mu.Lock()
	overflow := p.overflow
	p.overflow = false
	p.mu.Unlock()
	if overflow {
		p.report(p.sweepNames(ctx))
	}
}

// sweepNames prunes every name with more than KeepVersions write
// revisions, reading the history keys (without values) in key order, in
// chunks: a name's keys are contiguous.
func (p *pruner) sweepNames(ctx context.Context) error {
	dir := p.b.keys.prefix + historyDir
	end := clientv3.GetPrefixRangeEnd(dir)
	var name string
	var n int
	flush := func() error {
		if n > p.b.hist.KeepVersions {
			return p.pruneName(ctx, name)
		}
		return nil
	}
	for from := dir; ; {
		resp, err := p.b.client.Get(ctx, from, clientv3.WithRange(end), clientv3.WithKeysOnly(), clientv3.WithLimit(10000))
		if err != nil {
			return err
		}
		for _, kv := range resp.Kvs {
			key := string(kv.Key)
			// <dir><group>/<kind>/<partition>/<namespace>/<name>/<uid>/<generation>
			i := nthSlash(key[len(dir):], 5)
			if i < 0 {
				continue
			}
			if prefix := key[:len(dir)+i+1]; prefix != name {
				if err := flush(); err != nil {
					return err
				}
				name, n = prefix, 0
			}
			n++
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return flush()
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// nthSlash returns the index of the n-th '/' of s (from 1), or -1.
func nthSlash(s string, n int) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if n--; n == 0 {
				return i
			}
		}
	}
	return -1
}
