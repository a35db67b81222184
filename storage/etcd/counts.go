package etcd

import (
	"bytes"
	"context"
	"fmt"
	"sync"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// Counts (storage.Counter). Several servers share one etcd, so a count
// kept by one process must see every server's writes: the Backend keeps
// them from its change feed, the one etcd watch over all its resources.
// The first Stats call registers a counter with the feed (starting the
// feed if no watch runs, and keeping it running from then on), at the
// feed's revision R at that moment, and counts the store at R in one
// paged range read that decodes no resource but the marked ones; from
// then on each change the feed receives (after R) adds its difference:
// +1 for a create, -1 for a delete, and ±1 marked when a write marks a
// resource for deletion or a delete removes a marked one. The differences
// add up whether they arrive before or after the count at R is in.
//
// Counts lag behind writes by the time the feed takes to receive them
// (milliseconds), as watches do. If the feed fails (etcd compacted what
// it still needed, or lost quorum for longer than watches wait), the next
// Stats call counts afresh. Writes pay nothing: the feed's goroutine does
// the counting.

// countKey is a type and tenancy counted.
type countKey struct {
	typ                  storage.UnversionedType
	partition, namespace string
}

// tally is what is counted under a countKey.
type tally struct{ resources, marked int64 }

// counter is a Backend's counts.
type counter struct {
	// startMu serializes Stats calls, which may (re)start counting; it
	// is taken before the feed's mu, never while holding it.
	startMu sync.Mutex
	// f is the feed the counts come from, nil before the first Stats.
	f *feed

	// mu guards tallies; the feed adds to them holding its own mu.
	mu      sync.Mutex
	tallies map[countKey]*tally
}

// delta is what one change adds to its countKey's tally.
type delta struct{ resources, marked int8 }

// deltaOf returns what the etcd event ev, whose resource (as stored, or
// last stored for a delete) is res, adds to the counts.
func deltaOf(ev *clientv3.Event, res *pbresource.Resource) delta {
	marked := resource.IsMarkedForDeletion(res)
	switch {
	case ev.Type == mvccpb.DELETE:
		return delta{resources: -1, marked: -bool8(marked)}
	case ev.IsCreate():
		return delta{resources: 1, marked: bool8(marked)}
	case ev.PrevKv == nil:
		return delta{}
	}
	if was := valueMarked(ev.PrevKv); was != marked {
		return delta{marked: bool8(marked) - bool8(was)}
	}
	return delta{}
}

func bool8(b bool) int8 {
	if b {
		return 1
	}
	return 0
}

// markKey is how the deletion mark's metadata key appears in a stored
// value; a value without it is not marked.
var markKey = []byte(resource.DeletionTimestampKey)

// valueMarked reports whether the resource stored in kv is marked for
// deletion. It decodes only values holding the mark's key somewhere; one
// that does not decode counts as not marked.
func valueMarked(kv *mvccpb.KeyValue) bool {
	if !bytes.Contains(kv.Value, markKey) {
		return false
	}
	res, err := decode(kv)
	return err == nil && resource.IsMarkedForDeletion(res)
}

// add adds the deltas of a feed's entries. The feed calls it holding its
// mu, in commit order.
func (c *counter) add(batch []*feedEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range batch {
		if e.delta != (delta{}) {
			c.addTo(countKey{e.typ, e.tk.partition, e.tk.namespace}, int64(e.delta.resources), int64(e.delta.marked))
		}
	}
}

// addTo adds to a tally, dropping it when nothing is left. The caller
// holds mu.
func (c *counter) addTo(k countKey, resources, marked int64) {
	t := c.tallies[k]
	if t == nil {
		t = new(tally)
		c.tallies[k] = t
	}
	t.resources += resources
	t.marked += marked
	if *t == (tally{}) {
		delete(c.tallies, k)
	}
}

// Stats returns the count of every type and tenancy holding resources
// (storage.Counter); see counts.go for how they are kept. The first call
// (and the first after the change feed failed) counts the store in one
// range read; later ones read memory.
func (b *Backend) Stats(ctx context.Context) ([]storage.Count, error) {
	c := &b.counts
	c.startMu.Lock()
	defer c.startMu.Unlock()
	if c.f != nil {
		select {
		case <-c.f.failed:
			b.detach(c.f)
			c.f = nil
		default:
		}
	}
	if c.f == nil {
		if err := b.startCounting(ctx); err != nil {
			return nil, err
		}
	}
	c.mu.Lock()
	out := make([]storage.Count, 0, len(c.tallies))
	for k, t := range c.tallies {
		out = append(out, storage.Count{Type: k.typ, Partition: k.partition, Namespace: k.namespace,
			Resources: t.resources, Marked: t.marked})
	}
	c.mu.Unlock()
	storage.SortCounts(out)
	return out, nil
}

// startCounting registers the counter with the change feed, at the
// feed's revision R, and adds the counts of the store at R. The caller
// holds startMu.
func (b *Backend) startCounting(ctx context.Context) error {
	c := &b.counts
	resp, err := b.client.Get(ctx, b.keys.prefix+resourceDir, clientv3.WithCountOnly())
	if err != nil {
		return readError(ctx, err)
	}
	f := b.attach(resp.Header.Revision + 1)
	c.mu.Lock()
	c.tallies = make(map[countKey]*tally)
	c.mu.Unlock()
	f.mu.Lock()
	f.counter = c
	at := f.known
	f.mu.Unlock()
	if err := b.countAt(ctx, at); err != nil {
		f.mu.Lock()
		f.counter = nil
		f.mu.Unlock()
		b.detach(f)
		return err
	}
	c.f = f
	return nil
}

// countAt adds the resources stored at revision rev to the counts, read in
// pages of b.pageSize keys.
func (b *Backend) countAt(ctx context.Context, rev int64) error {
	prefix := b.keys.prefix + resourceDir
	end := clientv3.GetPrefixRangeEnd(prefix)
	tallies := make(map[countKey]tally)
	for key := prefix; ; {
		resp, err := b.client.Get(ctx, key, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithLimit(b.pageSize))
		if err != nil {
			return fmt.Errorf("etcd: counting the resources at revision %d: %w", rev, readError(ctx, err))
		}
		for _, kv := range resp.Kvs {
			typ, tk, ok := b.keys.splitResource(kv.Key)
			if !ok {
				continue
			}
			k := countKey{typ, tk.partition, tk.namespace}
			t := tallies[k]
			t.resources++
			if valueMarked(kv) {
				t.marked++
			}
			tallies[k] = t
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	c := &b.counts
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, t := range tallies {
		c.addTo(k, t.resources, t.marked)
	}
	return nil
}
