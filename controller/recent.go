package controller

import (
	"sync"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller/queue"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
)

// recentChangesPerType bounds the changes a Manager remembers per managed
// type for a controller's start (see recentChanges).
const recentChangesPerType = 1024

// recentChanges remembers the IDs of the last resources of one managed type
// that live cache events changed (not those a snapshot found), whether or
// not a controller runs. When a controller starts, those go into its queue
// first, at Normal priority, ahead of the cache's bulk at Low: a resource
// written after the old leader stopped and before this Manager won the
// lease is waited for, and would otherwise wait behind the whole cache (up
// to the queue's aging bound).
type recentChanges struct {
	mu   sync.Mutex
	ids  []*pbresource.ID // a ring once full; read-only, shared with the cache
	next int              // where the next ID goes once full
}

func newRecentChanges(bound int) *recentChanges {
	return &recentChanges{ids: make([]*pbresource.ID, 0, bound)}
}

// add notes a change of the resource id. It keeps id (read-only), so it
// allocates nothing.
func (r *recentChanges) add(id *pbresource.ID) {
	r.mu.Lock()
	if len(r.ids) < cap(r.ids) {
		r.ids = append(r.ids, id)
	} else {
		r.ids[r.next] = id
		r.next = (r.next + 1) % len(r.ids)
	}
	r.mu.Unlock()
}

// newestFirst returns the IDs noted, the most recent first; an ID changed
// several times appears several times.
func (r *recentChanges) newestFirst() []*pbresource.ID {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]*pbresource.ID, 0, len(r.ids))
	for i := 1; i <= len(r.ids); i++ {
		out = append(out, r.ids[(r.next-i+len(r.ids))%len(r.ids)])
	}
	return out
}

// queueRecent queues, at Normal priority and the most recent first, a
// request for each recently changed managed resource the cache still
// holds (the same lifetime), and returns how many it queued (a resource
// changed several times counts once per change). Deletions are
// not replayed: like the bulk of queueCached, this only puts what the
// cache holds in a better order. Call it before queueCached, whose Low
// adds leave these at Normal.
func (s *subscription) queueRecent(r *recentChanges, c *cache.Cache) int {
	if r == nil {
		return 0
	}
	n := 0
	for _, id := range r.newestFirst() {
		ids, err := c.ListIDsReadOnly(id.Type, cache.IDIndex, cache.Key(id))
		if err != nil || len(ids) == 0 || (id.Uid != "" && ids[0].Uid != id.Uid) {
			continue
		}
		req := reconcile.Request{ID: ids[0]} // read-only, like the cache's
		s.queue.AddPriority(req.Key(), req, queue.Normal)
		n++
	}
	return n
}
