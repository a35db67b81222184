package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/storage/internal/eventq"
)

// DefaultCatchUps is how many watches may catch up from etcd's history at
// once, unless New is given WithCatchUps.
const DefaultCatchUps = 16

// catchUpBuffer is how many changes a catching-up watch may hold for its
// consumer before it ends with storage.ErrWatchTooSlow (as much as each
// watch held before the change feed). etcd replays history as fast as it
// can and its client buffers whatever is not taken, so a catch-up cannot
// make etcd wait for its consumer: one whose consumer is slower than the
// replay is bounded here instead. With every slot taken by a stalled
// consumer, the catch-ups hold at most DefaultCatchUps times this many
// decoded changes.
const catchUpBuffer = 16384

// catchUpProgressEvery is how often a catch-up that has received nothing
// asks etcd how far it has got.
const catchUpProgressEvery = 50 * time.Millisecond

// catchUpSeq numbers catch-ups, so that each one's etcd watch has a gRPC
// stream of its own.
var catchUpSeq atomic.Int64

// item is a change a catch-up hands to its watch and the revision it
// happened at; an item without an event says that the catch-up is over:
// the watch has every change up to rev and goes on in the feed's ring.
type item struct {
	ev  *pbresource.WatchEvent
	rev int64
}

// catchUp is a watch's etcd watch of its own range from a revision the
// feed's ring no longer holds, until it reaches the ring. Its changes wait
// in q for the consumer. At most Backend.catchUps run at once.
type catchUp struct {
	q      *eventq.Queue[item]
	cancel context.CancelFunc
	done   chan struct{} // closed when run returns
}

// tryCatchUp takes a catch-up slot, without waiting, and reports whether it
// got one.
func (b *Backend) tryCatchUp() bool {
	select {
	case b.catchUpSlots <- struct{}{}:
		return true
	default:
		return false
	}
}

// startCatchUp starts the catch-up of q's range from revision from for a
// watch reading f; the caller holds a slot, which the catch-up releases.
func (b *Backend) startCatchUp(f *feed, q query, from int64) *catchUp {
	ctx, cancel := context.WithCancel(context.Background())
	cu := &catchUp{
		q:      eventq.NewChanges[item](catchUpBuffer, cancel),
		cancel: cancel,
		done:   make(chan struct{}),
	}
	go cu.run(ctx, b, f, q, from)
	return cu
}

// run forwards the etcd watch's changes until one at or after the feed's
// floor, or a progress notification at or after it, shows that the ring
// holds the rest; then it hands over with an item without an event. It
// asks for progress every catchUpProgressEvery while nothing arrives: its
// etcd watch is alone on its gRPC stream, so a progress notification at
// revision X says that every change up to X has arrived. An etcd error
// ends the watch (the consumer starts a new one).
func (cu *catchUp) run(ctx context.Context, b *Backend, f *feed, q query, from int64) {
	defer close(cu.done)
	defer func() { <-b.catchUpSlots }()
	wctx, cancel := context.WithCancel(streamContext(ctx, "catch-up-"+strconv.FormatInt(catchUpSeq.Add(1), 10)))
	defer cancel()
	wch := b.client.Watch(wctx, q.rangePrefix, clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV())
	defer func() {
		cancel()
		go func() {
			for range wch {
			}
		}()
	}()
	ticker := time.NewTicker(catchUpProgressEvery)
	defer ticker.Stop()
	var items []item
	quiet := false
	for {
		var resp clientv3.WatchResponse
		var open bool
		select {
		case resp, open = <-wch:
		case <-ticker.C:
			if quiet {
				_ = b.client.RequestProgress(wctx)
			}
			quiet = true
			continue
		case <-ctx.Done():
			return
		}
		quiet = false
		if !open {
			cu.q.End(errors.New("etcd: the watch channel closed"))
			return
		}
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				err = fmt.Errorf("%w (needed revision %d): %w", ErrCompacted, from, err)
			}
			cu.q.End(err)
			return
		}
		reached := resp.Header.Revision
		if !resp.IsProgressNotify() {
			n := len(resp.Events)
			if n == 0 {
				continue
			}
			var err error
			if items, err = translateAll(items[:0], q, resp.Events); err != nil {
				cu.q.End(err)
				return
			}
			reached = resp.Events[n-1].Kv.ModRevision
			from = reached + 1
		}
		// Hand over once the ring holds every change after reached and
		// the feed has got that far (else a burst the feed has yet to
		// append could push reached out of the ring at once).
		f.mu.RLock()
		inRing := reached >= f.floor
		over := inRing && f.known >= reached
		f.mu.RUnlock()
		if over {
			items = append(items, item{rev: reached})
		} else if inRing {
			// The feed is behind: have etcd say how far it is.
			f.requestProgress()
		}
		if len(items) > 0 {
			running, endedNow := cu.q.TryPush(items...)
			if endedNow {
				b.dropped.Add(1)
			}
			if !running {
				return
			}
		}
		if over {
			return
		}
		clear(items)
	}
}

// stop ends the catch-up and waits until its etcd watch is released.
func (cu *catchUp) stop() {
	cu.q.Close()
	<-cu.done
}

// translateAll appends to items the items of the events q selects, in
// order. One response's resources share equal Types, Tenancies, metadata
// maps and versions (see rangeDecoder); a large response (a catch-up
// replays history in responses of up to thousands of events) is decoded
// on several goroutines (see decodeChunks).
func translateAll(items []item, q query, events []*clientv3.Event) ([]item, error) {
	start := len(items)
	items = slices.Grow(items, len(events))[:start+len(events)]
	out := items[start:]
	err := decodeChunks(len(events), func(d *rangeDecoder, from, to int) error {
		for i := from; i < to; i++ {
			it, ok, err := translate(d, q, events[i])
			if err != nil {
				return err
			}
			if !ok {
				it = item{}
			}
			out[i] = it
		}
		return nil
	})
	if err != nil {
		clear(out)
		return items[:start], err
	}
	kept := start
	for _, it := range out {
		if it.ev != nil {
			items[kept] = it
			kept++
		}
	}
	clear(items[kept:])
	return items[:kept], nil
}

// translate turns an etcd event into a watch item, ok false when the query
// does not select its key.
func translate(d *rangeDecoder, q query, ev *clientv3.Event) (item, bool, error) {
	kv := ev.Kv
	if !q.exact {
		tk, ok := q.split(kv.Key)
		if !ok || !q.matches(tk) {
			return item{}, false, nil
		}
	}
	switch ev.Type {
	case mvccpb.PUT:
		res, err := decodeWith(d, kv)
		if err != nil {
			return item{}, false, err
		}
		return item{ev: eventq.NewEvent(res, false, ""), rev: kv.ModRevision}, true, nil
	case mvccpb.DELETE:
		if ev.PrevKv == nil {
			return item{}, false, fmt.Errorf("%w: key %q at revision %d", errNoPrevKV, kv.Key, kv.ModRevision)
		}
		res, err := decodeWith(d, ev.PrevKv)
		if err != nil {
			return item{}, false, err
		}
		return item{ev: eventq.NewEvent(res, true, strconv.FormatInt(kv.ModRevision, 10)), rev: kv.ModRevision}, true, nil
	}
	return item{}, false, fmt.Errorf("etcd: unknown event type %v", ev.Type)
}
