package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// DefaultPrefix is the key prefix a Backend uses unless New is given
// WithPrefix.
const DefaultPrefix = "/loom"

// DefaultWatchLogEvents is how many changes the backend's change feed keeps
// for its watches, unless New is given WithWatchLogEvents: how far (in
// changes of any type) a watch may fall behind before it is ended with
// storage.ErrWatchTooSlow, and how far back a watch resumes without asking
// etcd's history. The ring's slots cost 8 bytes each (1 MB); the entries
// keep their decoded events alive within DefaultWatchLogBytes, the bound
// that binds first for small resources.
const DefaultWatchLogEvents = 131072

// DefaultWatchLogBytes bounds the estimated memory of the changes the
// change feed keeps, unless New is given WithWatchLogBytes: 32 MiB, as the
// in-memory store's event log.
const DefaultWatchLogBytes = 32 << 20

// DefaultWatchBufferSize is DefaultWatchLogEvents, its name from when each
// watch had a buffer of its own.
//
// Deprecated: use DefaultWatchLogEvents.
const DefaultWatchBufferSize = DefaultWatchLogEvents

// Option configures a Backend in New.
type Option func(*Backend)

// WithPrefix sets the prefix of every key the backend reads and writes
// (DefaultPrefix if not given). Backends with different prefixes share
// nothing, so one etcd cluster can hold several Loom stores. A trailing "/"
// is dropped.
func WithPrefix(prefix string) Option {
	return func(b *Backend) { b.keys.prefix = strings.TrimRight(prefix, "/") }
}

// WithWatchLogEvents sets how many changes the change feed keeps (see
// DefaultWatchLogEvents), rounded up to a power of two. Values below 1 are
// treated as 1.
func WithWatchLogEvents(n int) Option {
	return func(b *Backend) { b.logEvents = max(n, 1) }
}

// WithWatchLogBytes bounds the estimated bytes of the changes the change
// feed keeps (see DefaultWatchLogBytes): the oldest are dropped beyond it.
// A change is estimated from the size of its etcd key and value plus a
// fixed overhead; the newest is always kept. Values below 1 are treated as
// 1.
func WithWatchLogBytes(n int64) Option {
	return func(b *Backend) { b.logBytes = max(n, 1) }
}

// WithWatchBufferSize is WithWatchLogEvents, its name from when each watch
// had a buffer of its own.
//
// Deprecated: use WithWatchLogEvents.
func WithWatchBufferSize(n int) Option { return WithWatchLogEvents(n) }

// WithCatchUps sets how many watches may catch up from etcd's history at
// once (see DefaultCatchUps and Backend.WatchListSince). Values below 1
// are treated as 1.
func WithCatchUps(n int) Option {
	return func(b *Backend) { b.catchUps = max(n, 1) }
}

// WithLogger sets the logger for what the backend does on its own: watches
// that are re-established after a transient error. The default discards.
func WithLogger(logger hclog.Logger) Option {
	return func(b *Backend) { b.logger = logger }
}

// Backend is a storage.Backend on an etcd v3 cluster. It is safe for
// concurrent use. Create one with New; several Backends (in one process or
// several) may share a cluster and a prefix: everything they agree on is in
// etcd.
type Backend struct {
	client    *clientv3.Client
	keys      keys
	logEvents int
	logBytes  int64
	catchUps  int
	logger    hclog.Logger

	// markInterval is how often Start's loop records the high-water mark.
	markInterval time.Duration
	// callTimeout bounds each etcd request (see WithCallTimeout); metrics
	// counts them.
	callTimeout time.Duration
	metrics     *callMetrics

	// seen is the greatest etcd revision this backend has observed: in the
	// response to a read or a write, or in an event a watch handed out.
	// Eventually consistent reads are never served from an etcd member
	// that is behind it (see Read).
	seen atomic.Int64

	// slowWrites counts the updates made by updateSlow, and
	// readFallbacks the eventually consistent reads repeated as
	// linearizable ones; for tests.
	slowWrites    atomic.Int64
	readFallbacks atomic.Int64

	// feed is the running change feed, nil before the first watch and
	// after the last (see attach).
	feedMu sync.Mutex
	feed   *feed
	// catchUpSlots holds a token per running catch-up (capacity catchUps).
	catchUpSlots chan struct{}

	// watches are the running watches and dropped counts those ended for
	// falling behind, for WatchStats.
	watchMu sync.Mutex
	watches map[*watch]struct{}
	dropped atomic.Uint64

	// beforeWatch, when set (by tests), runs between the snapshot read of
	// a WatchList and its placing in the change feed.
	beforeWatch func(snapshotRev int64)

	// pageSize is how many keys a request of readRange asks for
	// (rangePageSize; tests make it small). afterPage, when set (by
	// tests), runs after each page a paged readRange read at rev.
	pageSize  int64
	afterPage func(rev int64)

	// hist is the history's limits, nil when none is kept (history.go);
	// pruner enforces them once Start runs it, pruning a name's
	// versions pruneDelay after its writes at the latest (tests shorten
	// it).
	hist       *historyLimits
	pruner     *pruner
	pruneDelay time.Duration

	// counts are the counts of resources (counts.go).
	counts counter
}

var (
	_ storage.Backend = (*Backend)(nil)
	_ storage.Counter = (*Backend)(nil)
)

// New returns a Backend that keeps resources in the etcd cluster client is
// connected to. The Backend does not own client: close it after the last
// use of the Backend and its watches.
func New(client *clientv3.Client, opts ...Option) *Backend {
	b := &Backend{
		client:    client,
		keys:      keys{prefix: DefaultPrefix},
		logEvents: DefaultWatchLogEvents,
		logBytes:  DefaultWatchLogBytes,
		catchUps:  DefaultCatchUps,
		logger:    hclog.NewNullLogger(),
		pageSize:  rangePageSize,

		markInterval: DefaultMarkInterval,
		callTimeout:  DefaultCallTimeout,
		metrics:      newCallMetrics(),
		hist:         newHistoryLimits(storage.HistoryLimits{}),
		pruneDelay:   defaultPruneDelay,
	}
	for _, opt := range opts {
		opt(b)
	}
	if b.hist != nil {
		b.pruner = newPruner(b)
	}
	b.catchUpSlots = make(chan struct{}, b.catchUps)
	return b
}

// observe records that the backend has seen the store at revision rev.
func (b *Backend) observe(rev int64) {
	for {
		cur := b.seen.Load()
		if rev <= cur || b.seen.CompareAndSwap(cur, rev) {
			return
		}
	}
}

// marshalOptions give the same bytes for the same resource (map order), so
// stored values can be compared and deduplicated.
var marshalOptions = proto.MarshalOptions{Deterministic: true}

// encode returns the stored form of res with Uid uid: everything but the
// Version, which is the key's mod revision. The encoding starts with the
// resource's Id and Owner (fields 1 and 2, written first by a deterministic
// encoding); idLen is their length. Two stored values begin with the same
// idLen bytes exactly when they have the same Id (Uid and GroupVersion
// included) and Owner, which WriteCAS compares in etcd.
func encode(res *pbresource.Resource, uid string) (value []byte, idLen int, err error) {
	id := res.Id
	if id.Uid != uid {
		id = resource.CloneID(id)
		id.Uid = uid
	}
	// Shallow copies without the Version; the parts are only read. A
	// message's encoding is the concatenation of its fields' encodings, so
	// encoding the identity and the rest one after the other gives the
	// encoding of the whole.
	value, err = marshalOptions.Marshal(&pbresource.Resource{Id: id, Owner: res.Owner})
	if err != nil {
		return nil, 0, err
	}
	idLen = len(value)
	value, err = marshalOptions.MarshalAppend(value, &pbresource.Resource{
		Generation: res.Generation,
		Metadata:   res.Metadata,
		Status:     res.Status,
		Data:       res.Data,
	})
	return value, idLen, err
}

// get reads the keys op selects. An eventually consistent read is served
// by whichever member the client talks to (a serializable read), unless
// that member is behind what this backend has already seen: then it is
// repeated as a linearizable read, which keeps reads monotonic across
// members.
func (b *Backend) get(ctx context.Context, consistency storage.ReadConsistency, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	if consistency != storage.StrongConsistency {
		resp, err := b.callGet(ctx, opGetSerializable, key, append(opts, clientv3.WithSerializable())...)
		if err == nil && resp.Header.Revision >= b.seen.Load() {
			b.observe(resp.Header.Revision)
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, readError(ctx, err)
		}
		// Behind, or this member could not answer at all: ask the leader.
		b.readFallbacks.Add(1)
		b.metrics.retried(retryStaleMember)
	}
	resp, err := b.callGet(ctx, opGet, key, opts...)
	if err != nil {
		return nil, readError(ctx, err)
	}
	b.observe(resp.Header.Revision)
	return resp, nil
}

// Read returns the resource stored under id. StrongConsistency reads are
// linearizable; EventualConsistency reads are serializable reads of the
// nearest member, monotonic for this Backend (see get).
func (b *Backend) Read(ctx context.Context, consistency storage.ReadConsistency, id *pbresource.ID) (*pbresource.Resource, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	resp, err := b.get(ctx, consistency, b.keys.resource(id))
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, storage.ErrNotFound
	}
	res, err := decode(resp.Kvs[0])
	if err != nil {
		return nil, err
	}
	if id.Uid != "" && id.Uid != res.Id.Uid {
		return nil, storage.ErrNotFound
	}
	if gv := res.Id.Type.GroupVersion; gv != id.Type.GroupVersion {
		return nil, storage.GroupVersionMismatchError{RequestedType: id.Type, Stored: res}
	}
	return res, nil
}

// WriteCAS stores res if res.Version is the stored version (empty: the
// resource must not exist), in one etcd transaction that compares the
// resource key's mod revision, and writes the resource and its
// owner-index entry together. The returned copy's Version is the
// transaction's revision.
//
// An update is one round trip when res has a Uid and keeps the stored
// Owner and GroupVersion (the common case): besides the mod revision, the
// transaction checks that the stored value begins with the encoding of
// res's Id and Owner, which proves the Uid matches without reading it
// first (see encode). Otherwise — no Uid, a new owner or GroupVersion, or a
// compare that failed — WriteCAS reads the stored resource, says why the
// write cannot be made (ErrWrongUid, ErrCASFailure) or makes it with a
// transaction that compares the mod revision it read and moves the
// owner-index entry as needed.
func (b *Backend) WriteCAS(ctx context.Context, res *pbresource.Resource) (*pbresource.Resource, error) {
	id := res.GetId()
	if err := checkID(id); err != nil {
		return nil, err
	}
	if res.Owner != nil {
		if err := checkID(res.Owner); err != nil {
			return nil, fmt.Errorf("owner: %w", err)
		}
	}
	fence, fenced, err := b.fenceFrom(ctx)
	if err != nil {
		return nil, err
	}
	if res.Version == "" {
		return b.create(ctx, res, fence, fenced)
	}
	version, err := strconv.ParseInt(res.Version, 10, 64)
	if err != nil || version <= 0 {
		// Not a version this store ever gave out.
		return nil, storage.ErrCASFailure
	}
	if id.Uid == "" {
		return b.updateSlow(ctx, res, version, nil, fence, fenced)
	}

	rk := b.keys.resource(id)
	value, idLen, err := encode(res, id.Uid)
	if err != nil {
		return nil, err
	}
	// The stored value has the same identity exactly when it starts with
	// value[:idLen] followed by the tag of a field after the Owner (fields
	// 4 to 7: 0x22 to 0x3a). Checking that it lies strictly between the
	// prefix followed by 0x13 and the prefix followed by 0xff does that
	// with etcd's two byte-wise compares: it excludes an Owner that res
	// lacks (tag 0x12) and any other identity, while 0x13 itself can never
	// follow (it is no field tag of a stored resource). A value that ends
	// right after the identity fails the compare and takes the slow path.
	ident := string(value[:idLen])
	cmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(rk), "=", version),
		clientv3.Compare(clientv3.Value(rk), ">", ident+"\x13"),
		clientv3.Compare(clientv3.Value(rk), "<", ident+"\xff"),
	}
	// Same owner, same ID: the owner-index entry stays as it is.
	ops, hi, err := b.withWriteHistory(ctx, []clientv3.Op{clientv3.OpPut(rk, string(value))}, res, id.Uid, value, false)
	if err != nil {
		return nil, err
	}
	resp, err := b.txn(ctx, cmps, ops, rk, fence, fenced)
	if err != nil {
		return nil, err
	}
	if resp.Succeeded {
		b.wroteHistory(resp, hi, id)
		return stored(res, id.Uid, resp.Header.Revision), nil
	}
	if err := fenceFailure(resp, fence, fenced); err != nil {
		return nil, err
	}
	cur, err := currentResource(resp)
	if err != nil {
		return nil, err
	}
	b.metrics.retried(retryCompareFailed)
	return b.updateSlow(ctx, res, version, cur, fence, fenced)
}

// create writes res, which must not exist yet. With an owner, the
// transaction also checks that the owner is stored, with res.Owner.Uid:
// first by the prefix of the owner's stored value (see ownerValueCmps),
// which needs no read; when that misses (the owner reference is not in the
// stored form, or the create failed for another reason), by the create
// revision of the owner's key, read from the failed transaction.
func (b *Backend) create(ctx context.Context, res *pbresource.Resource, fence fenceToken, fenced bool) (*pbresource.Resource, error) {
	id := res.Id
	rk := b.keys.resource(id)
	value, _, err := encode(res, id.Uid)
	if err != nil {
		return nil, err
	}
	ops := []clientv3.Op{clientv3.OpPut(rk, string(value))}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(rk), "=", 0)}
	if res.Owner == nil {
		ops, _, err := b.withWriteHistory(ctx, ops, res, id.Uid, value, true)
		if err != nil {
			return nil, err
		}
		resp, err := b.txn(ctx, cmps, ops, "", fence, fenced)
		if err != nil {
			return nil, err
		}
		if !resp.Succeeded {
			if err := fenceFailure(resp, fence, fenced); err != nil {
				return nil, err
			}
			return nil, storage.ErrCASFailure
		}
		return stored(res, id.Uid, resp.Header.Revision), nil
	}

	idx, err := marshalOptions.Marshal(id)
	if err != nil {
		return nil, err
	}
	ops = append(ops, clientv3.OpPut(b.keys.ownerIndex(res.Owner, id), string(idx)))
	ops, _, err = b.withWriteHistory(ctx, ops, res, id.Uid, value, true)
	if err != nil {
		return nil, err
	}
	ownerKey := b.keys.resource(res.Owner)
	ownerCmps := ownerValueCmps(ownerKey, res.Owner)
	if ownerCmps == nil {
		rev, err := b.ownerRevision(ctx, res.Owner)
		if err != nil {
			return nil, err
		}
		ownerCmps = ownerRevisionCmps(ownerKey, rev)
	}
	for attempt := 0; ; attempt++ {
		resp, err := b.txn(ctx, append(cmps[:1:1], ownerCmps...), ops, ownerKey, fence, fenced)
		if err != nil {
			return nil, err
		}
		if resp.Succeeded {
			return stored(res, id.Uid, resp.Header.Revision), nil
		}
		if err := fenceFailure(resp, fence, fenced); err != nil {
			return nil, err
		}
		owner, err := currentResource(resp)
		if err != nil {
			return nil, err
		}
		if owner == nil || (res.Owner.Uid != "" && owner.Id.Uid != res.Owner.Uid) {
			return nil, storage.ErrOwnerNotFound
		}
		if attempt > 0 {
			return nil, storage.ErrCASFailure // the owner is there: the resource exists
		}
		// The owner is there: the resource exists, or the value compare
		// missed. Compare what the transaction found instead.
		b.metrics.retried(retryCompareFailed)
		ownerCmps = ownerRevisionCmps(ownerKey, createRevision(resp))
	}
}

// ownerValueCmps returns compares that hold exactly when the value under
// ownerKey is a stored resource whose Id encodes to the size of owner's and
// begins with owner's Uid: the encoding of a stored resource starts with
// its Id (field 1), whose first field is the Uid, and a Uid names one
// lifetime. It returns nil when owner has no Uid. An owner reference that
// differs from the stored Id in size (another GroupVersion, say) fails the
// compare although the owner exists; create then falls back to
// ownerRevisionCmps.
func ownerValueCmps(ownerKey string, owner *pbresource.ID) []clientv3.Cmp {
	if owner.Uid == "" {
		return nil
	}
	prefix := protowire.AppendTag(nil, 1, protowire.BytesType)
	prefix = protowire.AppendVarint(prefix, uint64(proto.Size(owner)))
	prefix = protowire.AppendTag(prefix, 1, protowire.BytesType)
	prefix = protowire.AppendString(prefix, owner.Uid)
	// The Uid is followed by the Id's further fields (tags 0x12 to 0x22)
	// and the resource's, never by 0xff.
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.Value(ownerKey), ">", string(prefix)),
		clientv3.Compare(clientv3.Value(ownerKey), "<", string(prefix)+"\xff"),
	}
}

// ownerRevisionCmps returns the compare that holds while the owner's key
// keeps create revision rev: while that lifetime of the owner is stored.
func ownerRevisionCmps(ownerKey string, rev int64) []clientv3.Cmp {
	return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ownerKey), "=", rev)}
}

// createRevision returns the create revision of what the first Else get of
// a failed transaction found (0 if nothing).
func createRevision(resp *clientv3.TxnResponse) int64 {
	if len(resp.Responses) == 0 {
		return 0
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return 0
	}
	return kvs[0].CreateRevision
}

// ownerRevision returns the create revision of owner's key while it holds
// owner (with its Uid, if given): a transaction that compares it holds
// only while that lifetime of the owner is stored, since deleting and
// creating the name again changes it. It reads the owner eventually, then
// linearizably if that finds nothing (so a lagging member cannot refuse
// the write), and returns storage.ErrOwnerNotFound if it is not stored.
func (b *Backend) ownerRevision(ctx context.Context, owner *pbresource.ID) (int64, error) {
	key := b.keys.resource(owner)
	for _, consistency := range [...]storage.ReadConsistency{storage.EventualConsistency, storage.StrongConsistency} {
		resp, err := b.get(ctx, consistency, key)
		if err != nil {
			return 0, err
		}
		if len(resp.Kvs) == 0 {
			continue
		}
		cur, err := decode(resp.Kvs[0])
		if err != nil {
			return 0, err
		}
		if owner.Uid == "" || owner.Uid == cur.Id.Uid {
			return resp.Kvs[0].CreateRevision, nil
		}
	}
	return 0, storage.ErrOwnerNotFound
}

// ownerGone reports whether a failed transaction found the owner's key
// (its first Else get) no longer at create revision rev.
func ownerGone(resp *clientv3.TxnResponse, rev int64) bool {
	if len(resp.Responses) == 0 {
		return false
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	return len(kvs) == 0 || kvs[0].CreateRevision != rev
}

// updateSlow writes res over cur, the stored resource (read here when cur
// is nil), if cur's version is version, with a transaction that compares
// only the mod revision and moves or rewrites the owner-index entry as
// needed.
func (b *Backend) updateSlow(ctx context.Context, res *pbresource.Resource, version int64, cur *pbresource.Resource, fence fenceToken, fenced bool) (*pbresource.Resource, error) {
	b.slowWrites.Add(1)
	id := res.Id
	rk := b.keys.resource(id)
	if cur == nil {
		resp, err := b.get(ctx, storage.StrongConsistency, rk)
		if err != nil {
			return nil, err
		}
		if len(resp.Kvs) == 0 {
			return nil, storage.ErrCASFailure
		}
		if cur, err = decode(resp.Kvs[0]); err != nil {
			return nil, err
		}
	}
	if id.Uid != "" && id.Uid != cur.Id.Uid {
		return nil, storage.ErrWrongUid
	}
	if cur.Version != strconv.FormatInt(version, 10) {
		return nil, storage.ErrCASFailure
	}

	uid := cur.Id.Uid
	value, _, err := encode(res, uid)
	if err != nil {
		return nil, err
	}
	ops := []clientv3.Op{clientv3.OpPut(rk, string(value))}
	oldIdx, newIdx := b.keys.ownerIndex(cur.Owner, id), b.keys.ownerIndex(res.Owner, id)
	if oldIdx != "" && oldIdx != newIdx {
		ops = append(ops, clientv3.OpDelete(oldIdx))
	}
	if newIdx != "" && (newIdx != oldIdx || !proto.Equal(res.Id.Type, cur.Id.Type)) {
		withUid := resource.CloneID(id)
		withUid.Uid = uid
		idx, err := marshalOptions.Marshal(withUid)
		if err != nil {
			return nil, err
		}
		ops = append(ops, clientv3.OpPut(newIdx, string(idx)))
	}
	ops, hi, err := b.withWriteHistory(ctx, ops, res, uid, value, false)
	if err != nil {
		return nil, err
	}
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(rk), "=", version)}
	var ownerKey string
	var ownerRev int64
	if newIdx != "" && newIdx != oldIdx {
		// A new owner must exist, as on a create.
		ownerKey = b.keys.resource(res.Owner)
		if ownerRev, err = b.ownerRevision(ctx, res.Owner); err != nil {
			return nil, err
		}
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(ownerKey), "=", ownerRev))
	}
	resp, err := b.txn(ctx, cmps, ops, ownerKey, fence, fenced)
	if err != nil {
		return nil, err
	}
	if !resp.Succeeded {
		if err := fenceFailure(resp, fence, fenced); err != nil {
			return nil, err
		}
		if ownerKey != "" && ownerGone(resp, ownerRev) {
			return nil, storage.ErrOwnerNotFound
		}
		// Changed or deleted since it was read.
		return nil, storage.ErrCASFailure
	}
	b.wroteHistory(resp, hi, id)
	return stored(res, uid, resp.Header.Revision), nil
}

// stored returns the copy of res that WriteCAS stored at revision rev.
func stored(res *pbresource.Resource, uid string, rev int64) *pbresource.Resource {
	out := resource.Clone(res)
	out.Id.Uid = uid
	out.Version = strconv.FormatInt(rev, 10)
	return out
}

// txn commits If(cmps, fence) Then(ops) Else(get of elseKey if not empty,
// get of the fence key if fenced).
func (b *Backend) txn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op, elseKey string, fence fenceToken, fenced bool) (*clientv3.TxnResponse, error) {
	var elseOps []clientv3.Op
	if elseKey != "" {
		elseOps = append(elseOps, clientv3.OpGet(elseKey))
	}
	if fenced {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(fence.key), "=", fence.rev))
		elseOps = append(elseOps, clientv3.OpGet(fence.key, clientv3.WithKeysOnly()))
	}
	if fenced {
		// A fenced write is a leader's controller writing, and its term
		// ending is exactly when the Manager cancels the controller: its
		// outcome (written before the term ended, or refused by the fence)
		// is still waited for, so that it is known and reported rather
		// than lost in a cancellation. So a fenced write is sent even if
		// ctx has ended, and waited for up to the call timeout.
		ctx = context.WithoutCancel(ctx)
	}
	resp, err := b.callTxn(ctx, opTxn, cmps, ops, elseOps)
	if err != nil {
		return nil, writeError(ctx, err)
	}
	b.observe(resp.Header.Revision)
	return resp, nil
}

// currentResource decodes what the first Else get of a failed transaction
// found, nil if nothing.
func currentResource(resp *clientv3.TxnResponse) (*pbresource.Resource, error) {
	if len(resp.Responses) == 0 {
		return nil, nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 0 {
		return nil, nil
	}
	return decode(kvs[0])
}

// DeleteCAS deletes the resource under id if version is empty or its mod
// revision. It reads the stored resource (linearizably: a stale "not
// found" would make the delete a silent no-op), then deletes the resource
// and its owner-index entry in one transaction that
// compares the mod revision it read. A blanket delete that loses a race
// tries again with what the transaction found.
func (b *Backend) DeleteCAS(ctx context.Context, id *pbresource.ID, version string, opts ...storage.DeleteOption) error {
	if err := checkID(id); err != nil {
		return err
	}
	do := storage.NewDeleteOptions(opts...)
	var tombKey, tombValue string
	if newTombstone := do.Tombstone; newTombstone != nil {
		// Needed up front: the transaction decides whether to store it.
		tomb, err := newTombstone()
		if err != nil {
			return err
		}
		if err := checkID(tomb.GetId()); err != nil {
			return fmt.Errorf("tombstone: %w", err)
		}
		tombKey = b.keys.resource(tomb.Id)
		value, _, err := encode(tomb, tomb.Id.Uid)
		if err != nil {
			return err
		}
		tombValue = string(value)
	}
	fence, fenced, err := b.fenceFrom(ctx)
	if err != nil {
		return err
	}
	rk := b.keys.resource(id)
	resp, err := b.get(ctx, storage.StrongConsistency, rk)
	if err != nil {
		return err
	}
	kvs := resp.Kvs
	for {
		if len(kvs) == 0 {
			if do.MustExist {
				return storage.ErrCASFailure
			}
			return nil
		}
		cur, err := decode(kvs[0])
		if err != nil {
			return err
		}
		if id.Uid != "" && id.Uid != cur.Id.Uid {
			if do.MustExist {
				return storage.ErrCASFailure
			}
			return nil
		}
		if version != "" && version != cur.Version {
			return storage.ErrCASFailure
		}
		ops := []clientv3.Op{clientv3.OpDelete(rk)}
		if cur.Owner != nil {
			ops = append(ops, clientv3.OpDelete(b.keys.ownerIndex(cur.Owner, id)))
		}
		if tombKey != "" {
			// In the same transaction: store the tombstone if the resource
			// owns anything (every key under its owner prefix has a create
			// revision above 0; an empty range compares as one with 0) and
			// nothing is stored under the tombstone's name yet.
			ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{
				clientv3.Compare(clientv3.CreateRevision(b.keys.ownerPrefix(cur.Id)), ">", 0).WithPrefix(),
				clientv3.Compare(clientv3.CreateRevision(tombKey), "=", 0),
			}, []clientv3.Op{clientv3.OpPut(tombKey, tombValue)}, nil))
		}
		hops, err := b.deleteHistoryOps(ctx, kvs[0], cur)
		if err != nil {
			return err
		}
		ops = append(ops, hops...)
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(rk), "=", kvs[0].ModRevision)}
		tresp, err := b.txn(ctx, cmps, ops, rk, fence, fenced)
		if err != nil {
			return err
		}
		if tresp.Succeeded {
			if hops != nil {
				b.pruner.trash(b.keys.trashTypePrefix(storage.UnversionedTypeFrom(id.Type)))
			}
			return nil
		}
		if err := fenceFailure(tresp, fence, fenced); err != nil {
			return err
		}
		kvs = tresp.Responses[0].GetResponseRange().GetKvs()
		if err := ctx.Err(); err != nil {
			return err
		}
		b.metrics.retried(retryCompareFailed)
	}
}

// List returns the resources of resType in tenancy whose names start with
// namePrefix, ordered by partition, namespace and name, all as stored at
// one etcd revision (see readRange and the key layout in keys.go).
// StrongConsistency is honoured with a linearizable read.
func (b *Backend) List(ctx context.Context, consistency storage.ReadConsistency, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string) ([]*pbresource.Resource, error) {
	q, err := b.keys.query(resType, tenancy, namePrefix)
	if err != nil {
		return nil, err
	}
	if q.empty {
		return nil, nil
	}
	res, _, err := b.readRange(ctx, consistency, q)
	return res, err
}

// OwnerReferences returns the IDs of the resources whose owner is id (Uid
// included, GroupVersion ignored), from one range read of the owner index.
// The read is monotonic like an eventually consistent Read, so once a
// watch delivered the owner's deletion, the index read reflects at least
// that revision.
func (b *Backend) OwnerReferences(ctx context.Context, id *pbresource.ID) ([]*pbresource.ID, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	resp, err := b.get(ctx, storage.EventualConsistency, b.keys.ownerPrefix(id), clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	out := make([]*pbresource.ID, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		ref := new(pbresource.ID)
		if err := proto.Unmarshal(kv.Value, ref); err != nil {
			return nil, fmt.Errorf("etcd: decoding the owner index entry %q: %w", kv.Key, err)
		}
		out[i] = ref
	}
	return out, nil
}

// errorsIs reports whether err is any of targets.
func errorsIs(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
