package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loomrt/loom/resource"
)

// LayoutVersion is the version of the key layout (keys.go) and value
// encoding this backend reads and writes. Start records it in etcd under
// the prefix at first start and refuses a store whose recorded layout is
// newer.
const LayoutVersion = 1

// DefaultMarkInterval is how often a started Backend records the store's
// high-water mark, unless New is given WithMarkInterval.
const DefaultMarkInterval = 10 * time.Second

// markWriteTimeout bounds one write of the high-water mark, including the
// last one when Start's stop is called.
const markWriteTimeout = 5 * time.Second

var (
	// ErrLayoutTooNew is returned by Start when the store was written by a
	// newer Loom, with a key layout this server does not know.
	ErrLayoutTooNew = errors.New("etcd: the store's layout is newer than this server's")

	// ErrStoreRewound is returned by Start when the store went back in
	// time: etcd serves revisions that Loom has already handed out to other
	// changes, typically after a restore from a snapshot without a revision
	// bump. Loom refuses to serve it rather than reuse versions.
	ErrStoreRewound = errors.New("etcd: the store went back in time")
)

// The store's own keys, under the prefix P, beside the resources (P/r/),
// the owner index (P/o/) and the leader election (ElectionKey):
//
//	P/meta/layout  LayoutVersion, decimal
//	P/meta/store   the store record, JSON (storeRecord)
const (
	layoutKeySuffix = "/meta/layout"
	storeKeySuffix  = "/meta/store"
)

// storeRecord is what Loom remembers of the etcd store it serves: which
// etcd cluster, how far its raft log was, and the greatest revision a Loom
// server has seen (the high-water mark). A record in a snapshot is restored
// with it: Start tells a restored cluster from the one that wrote the record
// by its cluster ID and by its raft index going back (a restored cluster
// starts a new raft log).
type storeRecord struct {
	ID        string `json:"id"`
	Cluster   uint64 `json:"cluster"`
	RaftIndex uint64 `json:"raft_index"`
	Revision  int64  `json:"revision"`
}

// WithMarkInterval sets how often a started Backend records the
// high-water mark (DefaultMarkInterval if not given). Values below 1 ms are
// treated as 1 ms.
func WithMarkInterval(d time.Duration) Option {
	return func(b *Backend) { b.markInterval = max(d, time.Millisecond) }
}

// Start checks the store before the backend serves it and then records the
// high-water mark every mark interval, and prunes the history to its limits
// (see WithHistory), until stop is called, which records the mark once more
// and returns. Call it once, before the backend serves.
//
// At first start it writes the layout version and a store record. At every
// start it refuses (ErrLayoutTooNew) a layout newer than LayoutVersion, and
// refuses (ErrStoreRewound) a store that went back in time:
//   - etcd's revision is below the recorded high-water mark; or
//   - the etcd cluster is not the one that wrote the record (another
//     cluster ID, or a raft log that went back: a snapshot restore) and the
//     record's revision is not compacted, so the restore was done without
//     etcdutl's --bump-revision and --mark-compacted.
//
// A restore with both is accepted: every revision it serves is above those
// handed out before it, and every resume point from before it is
// compacted, so a watch resumed there gets a new snapshot.
func (b *Backend) Start(ctx context.Context) (stop func(), err error) {
	if err := b.checkLayout(ctx); err != nil {
		return nil, err
	}
	if err := b.checkHistory(ctx); err != nil {
		return nil, err
	}
	markCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { b.markLoop(markCtx) })
	if b.pruner != nil {
		wg.Go(func() { b.pruner.run(markCtx) })
	}
	return func() { cancel(); wg.Wait() }, nil
}

// checkLayout writes LayoutVersion if no layout is recorded, and refuses a
// newer one.
func (b *Backend) checkLayout(ctx context.Context) error {
	key := b.keys.prefix + layoutKeySuffix
	resp, err := b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, strconv.Itoa(LayoutVersion))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return fmt.Errorf("etcd: checking the store's layout: %w", writeError(ctx, err))
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil // deleted in between; written at the next start
	}
	v, err := strconv.Atoi(string(kvs[0].Value))
	if err != nil {
		return fmt.Errorf("%w: %s holds %q, not a layout version", ErrLayoutTooNew, key, resource.Truncate(string(kvs[0].Value)))
	}
	if v > LayoutVersion {
		return fmt.Errorf("%w: the store has layout %d, this server knows layouts up to %d; run a Loom release that knows layout %d",
			ErrLayoutTooNew, v, LayoutVersion, v)
	}
	return nil
}

// etcdState is where etcd is now: its current revision, cluster ID and raft
// index.
type etcdState struct {
	revision  int64
	cluster   uint64
	raftIndex uint64
}

// readRecord reads the store record (nil if none), its mod revision, and
// etcd's current state, linearizably.
func (b *Backend) readRecord(ctx context.Context) (*storeRecord, int64, etcdState, error) {
	key := b.keys.prefix + storeKeySuffix
	resp, err := b.client.Get(ctx, key)
	if err != nil {
		return nil, 0, etcdState{}, readError(ctx, err)
	}
	st := etcdState{revision: resp.Header.Revision, cluster: resp.Header.ClusterId}
	if eps := b.client.Endpoints(); len(eps) > 0 {
		// The raft index of any member: a restored cluster's log starts
		// again near 0, far below that of a cluster that served a store.
		if s, err := b.client.Status(ctx, eps[0]); err == nil {
			st.raftIndex = s.RaftIndex
		}
	}
	if len(resp.Kvs) == 0 {
		return nil, 0, st, nil
	}
	rec := new(storeRecord)
	if err := json.Unmarshal(resp.Kvs[0].Value, rec); err != nil {
		return nil, 0, st, fmt.Errorf("etcd: the store record %s is not valid: %w; delete it to start a new one", key, err)
	}
	return rec, resp.Kvs[0].ModRevision, st, nil
}

// checkHistory refuses a store that went back in time (see Start) and
// records the store as seen now.
func (b *Backend) checkHistory(ctx context.Context) error {
	rec, recRev, st, err := b.readRecord(ctx)
	if err != nil {
		return err
	}
	if rec == nil {
		return b.writeRecord(ctx, &storeRecord{ID: resource.NewULID()}, 0, st, true)
	}
	if err := b.wentBack(ctx, rec, recRev, st); err != nil {
		return err
	}
	return b.writeRecord(ctx, rec, recRev, st, true)
}

// wentBack returns an error wrapping ErrStoreRewound if etcd, now at st,
// went back in time from the record rec, written at revision recRev (see
// Start). It logs a restore done with a revision bump.
func (b *Backend) wentBack(ctx context.Context, rec *storeRecord, recRev int64, st etcdState) error {
	if st.revision < rec.Revision {
		return fmt.Errorf("%w: etcd is at revision %d, below revision %d that Loom has served (store %s); "+
			"it was restored from an older snapshot without a revision bump: restore it again with "+
			"`etcdutl snapshot restore --bump-revision N --mark-compacted`, N above the revisions written since the snapshot "+
			"(see Backup and restore in docs/operations.md)",
			ErrStoreRewound, st.revision, rec.Revision, rec.ID)
	}
	// A restored cluster starts a new raft log near index 0. A member
	// may lag the one whose index was recorded: only an index below half
	// the recorded one counts as a new log.
	if st.cluster == rec.Cluster && (st.raftIndex == 0 || st.raftIndex >= rec.RaftIndex/2) {
		return nil // the cluster that wrote the record
	}
	compacted, err := b.compactedAt(ctx, recRev)
	if err != nil {
		return err
	}
	if !compacted {
		return fmt.Errorf("%w: etcd (cluster %x, revision %d) is not the cluster that recorded store %s at revision %d "+
			"(cluster %x), and that revision is not compacted: it was restored without a revision bump, so versions "+
			"would be reused; restore it again with `etcdutl snapshot restore --bump-revision N --mark-compacted`, "+
			"N above the revisions written since the snapshot (see Backup and restore in docs/operations.md)",
			ErrStoreRewound, st.cluster, st.revision, rec.ID, rec.Revision, rec.Cluster)
	}
	b.logger.Warn("the etcd store was restored with a revision bump: resume points from before the restore get a new snapshot",
		"store", rec.ID, "recorded_revision", rec.Revision, "revision", st.revision)
	return nil
}

// compactedAt reports whether etcd has compacted revision rev away.
func (b *Backend) compactedAt(ctx context.Context, rev int64) (bool, error) {
	_, err := b.client.Get(ctx, b.keys.prefix+storeKeySuffix, clientv3.WithRev(rev), clientv3.WithCountOnly())
	if errors.Is(err, rpctypes.ErrCompacted) {
		return true, nil
	}
	if err != nil {
		return false, readError(ctx, err)
	}
	return false, nil
}

// writeRecord records rec with the greatest revision of the record, st and
// what this backend has seen, and, if adopt, st's cluster and raft index,
// if the record is still at mod revision recRev (0: absent). A concurrent
// writer wins; its mark is as good.
func (b *Backend) writeRecord(ctx context.Context, rec *storeRecord, recRev int64, st etcdState, adopt bool) error {
	out := *rec
	if adopt {
		out.Cluster, out.RaftIndex = st.cluster, st.raftIndex
	}
	out.Revision = max(rec.Revision, st.revision, b.seen.Load())
	value, err := json.Marshal(&out)
	if err != nil {
		return err
	}
	key := b.keys.prefix + storeKeySuffix
	_, err = b.client.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", recRev)).
		Then(clientv3.OpPut(key, string(value))).Commit()
	if err != nil {
		return fmt.Errorf("etcd: recording the store's high-water mark: %w", writeError(ctx, err))
	}
	return nil
}

// markLoop records the high-water mark every mark interval until ctx ends,
// then once more.
func (b *Backend) markLoop(ctx context.Context) {
	t := time.NewTicker(b.markInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			b.mark(context.WithoutCancel(ctx))
			return
		}
		b.mark(ctx)
	}
}

// mark records the high-water mark if etcd moved since it was last
// recorded. A store that went back in time under a running server is
// logged, and the mark then keeps the record's cluster and raises its
// revision to what was seen, so that every server refuses the store at its
// next start.
func (b *Backend) mark(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, markWriteTimeout)
	defer cancel()
	rec, recRev, st, err := b.readRecord(ctx)
	if err != nil {
		b.logger.Warn("recording the store's high-water mark", "error", err)
		return
	}
	seen := b.seen.Load()
	adopt := true
	switch {
	case rec == nil:
		rec = &storeRecord{ID: resource.NewULID()}
	case recRev == st.revision && seen <= rec.Revision:
		return // nothing written since the last mark
	default:
		if st.revision < seen {
			err = fmt.Errorf("%w: etcd is at revision %d, below revision %d this server has seen", ErrStoreRewound, st.revision, seen)
		} else {
			err = b.wentBack(ctx, rec, recRev, st)
		}
		if err != nil {
			b.logger.Error("serving a store that went back in time: versions may be reused; restart every server after fixing the store",
				"error", err)
			adopt = false
		}
	}
	if err := b.writeRecord(ctx, rec, recRev, st, adopt); err != nil {
		b.logger.Warn("recording the store's high-water mark", "error", err)
	}
}
