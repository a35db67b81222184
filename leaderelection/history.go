package leaderelection

import (
	"context"
	"strconv"
	"sync"

	"github.com/loomrt/loom/proto/pbresource"
)

// history is what this replica's watch of the lease has seen since the
// stream began. It answers what a Read cannot: has anyone held this lease
// since it was created, and what did a Write of this replica overwrite?
//
// The ResourceService (Consul's too) has no create-if-absent: a Write
// without a Version that finds the lease already stored overwrites it. So a
// replica that found no lease and creates one may, when its Write lands
// late (even in the server's own retry loop, when another replica created
// the lease a moment earlier), overwrite a lease another replica has taken
// meanwhile, and that holder goes on believing it holds the lease until its
// next renewal. Such an overwritten record must not be free. The watch
// tells the two apart: WatchList sends every change after its snapshot, in
// commit order, with no gap. If the snapshot had no lease and no record
// since has had a holder, nobody holds or held this lease since it was
// created, and it may be taken at once. Otherwise it waits a lease
// duration, like any lease whose holder is unknown; and the replica whose
// creating Write overwrote a record puts that record back (see create).
//
// A deletion does not make the lease fresh again for a replica that saw a
// holder (the holder may not have noticed the deletion yet); a replica
// whose stream starts after the deletion cannot know, as with a deleted
// Lease object in Kubernetes.
type history struct {
	mu       sync.Mutex
	primed   bool                 // the stream has delivered its snapshot
	snapshot bool                 // the snapshot held the lease
	unheld   bool                 // the lease was absent at the snapshot, and no record since had a holder
	created  string               // the Version of the first record after the lease was absent
	last     *pbresource.Resource // the latest record (nil: absent)
	before   *pbresource.Resource // the record last overwrote (nil: the lease was absent)
	seen     uint64               // the highest Version the stream delivered for the lease
	changed  chan struct{}
}

func newHistory() *history { return &history{changed: make(chan struct{})} }

// restart forgets everything: a new stream begins.
func (h *history) restart() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.primed, h.snapshot, h.unheld = false, false, false
	h.created, h.last, h.before, h.seen = "", nil, nil, 0
	h.notifyLocked()
}

// upsert records res, a record of the lease the stream delivered, whose
// holder is holder.
func (h *history) upsert(res *pbresource.Resource, holder string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !h.primed:
		h.snapshot = true
	case h.last == nil:
		h.created = res.GetVersion()
	}
	h.unheld = h.unheld && holder == ""
	h.before, h.last = h.last, res
	h.advanceLocked(res.GetVersion())
}

// remove records the lease's deletion at version.
func (h *history) remove(version string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.before, h.last, h.created = nil, nil, ""
	h.advanceLocked(version)
}

// endSnapshot records the end of the stream's snapshot.
func (h *history) endSnapshot() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.primed, h.unheld = true, !h.snapshot
	h.notifyLocked()
}

func (h *history) advanceLocked(version string) {
	if v, err := strconv.ParseUint(version, 10, 64); err == nil && v > h.seen {
		h.seen = v
	}
	h.notifyLocked()
}

func (h *history) notifyLocked() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// fresh reports whether version is the lease's latest record and nobody
// has held the lease since it was created.
func (h *history) fresh(version string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.primed && h.unheld && h.last != nil && h.last.Version == version
}

// createdAt reports whether version is the record that created the lease.
func (h *history) createdAt(version string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.primed && version != "" && h.created == version
}

// overwritten returns the record that the write of version overwrote, when
// version is the latest record and the lease has had a holder since it was
// created; nil otherwise.
func (h *history) overwritten(version string) *pbresource.Resource {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.primed || h.unheld || h.last == nil || h.last.Version != version {
		return nil
	}
	return h.before
}

// waitPrimed waits until the stream has delivered its snapshot, and
// reports whether the lease was absent at the latest event; false when ctx
// ends first.
func (h *history) waitPrimed(ctx context.Context) (absent, ok bool) {
	ok = h.wait(ctx, func() bool { return h.primed })
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last == nil, ok
}

// waitSeen waits until the stream has delivered version (a decimal store
// version) or a later one, and reports whether it has.
func (h *history) waitSeen(ctx context.Context, version string) bool {
	v, err := strconv.ParseUint(version, 10, 64)
	if err != nil {
		return false
	}
	return h.wait(ctx, func() bool { return h.seen >= v })
}

// wait waits until cond (called with h.mu held) holds or ctx ends.
func (h *history) wait(ctx context.Context, cond func() bool) bool {
	for {
		h.mu.Lock()
		ok, changed := cond(), h.changed
		h.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-changed:
		}
	}
}
