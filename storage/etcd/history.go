package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// History (storage.Historian) lives under the backend's prefix P, beside
// the resources and outside the range the change feed watches (P/r/):
//
//	P/h/<group>/<kind>/<partition>/<namespace>/<name>/<uid>/<generation>
//	    a write revision: the first write of a generation of a lifetime
//	P/t/<group>/<kind>/<partition>/<namespace>/<name>/<uid>
//	    a deletion revision, the lifetime's entry in the trash
//	P/x/<owner uid>/<group>/<kind>/<partition>/<namespace>/<name>/<uid>
//	    the same deletion revision, for a resource that had an owner
//
// Each is put in the transaction of the write or deletion it records, so
// its mod revision is the change's version. A write revision's key is
// known before the commit (not the version, which is the transaction's
// revision): the transaction puts it only if it does not exist yet, so a
// write that keeps the Generation (a status write) records nothing, with
// no read before the write. The values are historyRecords.
const (
	historyDir    = "/h/"
	trashDir      = "/t/"
	ownerTrashDir = "/x/"
)

// WithHistory keeps history (storage.Historian) within limits; a zero field
// takes storage.DefaultHistoryLimits'. History is kept by default; it is
// pruned by the goroutine Start starts.
func WithHistory(limits storage.HistoryLimits) Option {
	return func(b *Backend) { b.hist = newHistoryLimits(limits) }
}

// WithoutHistory keeps no history: writes record nothing and the
// Historian methods find nothing.
func WithoutHistory() Option {
	return func(b *Backend) { b.hist = nil }
}

var _ storage.Historian = (*Backend)(nil)

// errBadVersion is returned for a version or page start that is not an
// etcd revision.
var errBadVersion = errors.New("etcd: version must be a version the store returned")

// historyLimits are the limits with defaults applied.
type historyLimits struct {
	storage.HistoryLimits
}

func newHistoryLimits(limits storage.HistoryLimits) *historyLimits {
	d := storage.DefaultHistoryLimits
	if limits.KeepVersions == 0 {
		limits.KeepVersions = d.KeepVersions
	}
	if limits.TrashRetention == 0 {
		limits.TrashRetention = d.TrashRetention
	}
	if limits.TrashPerType == 0 {
		limits.TrashPerType = d.TrashPerType
	}
	return &historyLimits{limits}
}

// expired reports whether a deletion made at t is past the retention.
func (l *historyLimits) expired(t time.Time, now time.Time) bool {
	return l.TrashRetention > 0 && now.Sub(t) > l.TrashRetention
}

// sweepInterval is how often the pruner sweeps the trash of every type.
func (l *historyLimits) sweepInterval() time.Duration {
	d := time.Minute
	if r := l.TrashRetention; r > 0 {
		d = min(d, max(r/8, 10*time.Millisecond))
	}
	return d
}

func (k keys) historyPrefix(id *pbresource.ID) string { return k.prefix + historyDir + path(id) + "/" }
func (k keys) lifetimeHistory(id *pbresource.ID, uid string) string {
	return k.historyPrefix(id) + uid + "/"
}
func (k keys) history(id *pbresource.ID, uid, generation string) string {
	return k.lifetimeHistory(id, uid) + generation
}
func (k keys) trashPrefix(id *pbresource.ID) string { return k.prefix + trashDir + path(id) + "/" }
func (k keys) trash(id *pbresource.ID, uid string) string {
	return k.trashPrefix(id) + uid
}
func (k keys) trashTypePrefix(typ storage.UnversionedType) string {
	return k.prefix + trashDir + typ.Group + "/" + typ.Kind + "/"
}
func (k keys) ownerTrashPrefix(ownerUid string) string {
	return k.prefix + ownerTrashDir + ownerUid + "/"
}
func (k keys) ownerTrash(ownerUid string, id *pbresource.ID, uid string) string {
	return k.ownerTrashPrefix(ownerUid) + path(id) + "/" + uid
}

// The fields of a historyRecord: the protobuf encoding of
//
//	message HistoryRecord {
//	  bytes resource = 1;        // as stored under P/r/ (no Version)
//	  string by = 2;             // Change.By
//	  bytes cascade_from = 3;    // Change.CascadeFrom, a pbresource.ID
//	  int64 time_unix_nano = 4;  // when the writer committed it
//	  int64 version = 5;         // a deletion's: the resource's last Version
//	  bool created = 6;          // the write created the resource
//	}
const (
	recResource = 1 + iota
	recBy
	recCascade
	recTime
	recVersion
	recCreated
)

// encodeRecord returns the value of a history key recording value (a
// stored resource's encoding) with the Change on ctx; version is the
// resource's version for a deletion, else 0; created says the write
// created the resource.
func encodeRecord(ctx context.Context, value []byte, version int64, created bool) (string, error) {
	c := storage.ChangeFrom(ctx)
	var cascade []byte
	if c.CascadeFrom != nil {
		var err error
		if cascade, err = marshalOptions.Marshal(c.CascadeFrom); err != nil {
			return "", err
		}
	}
	buf := make([]byte, 0, len(value)+len(c.By)+len(cascade)+32)
	buf = protowire.AppendTag(buf, recResource, protowire.BytesType)
	buf = protowire.AppendBytes(buf, value)
	if c.By != "" {
		buf = protowire.AppendTag(buf, recBy, protowire.BytesType)
		buf = protowire.AppendString(buf, c.By)
	}
	if cascade != nil {
		buf = protowire.AppendTag(buf, recCascade, protowire.BytesType)
		buf = protowire.AppendBytes(buf, cascade)
	}
	buf = protowire.AppendTag(buf, recTime, protowire.VarintType)
	buf = protowire.AppendVarint(buf, uint64(time.Now().UnixNano()))
	if version != 0 {
		buf = protowire.AppendTag(buf, recVersion, protowire.VarintType)
		buf = protowire.AppendVarint(buf, uint64(version))
	}
	if created {
		buf = protowire.AppendTag(buf, recCreated, protowire.VarintType)
		buf = protowire.AppendVarint(buf, 1)
	}
	return string(buf), nil
}

// decodeRecord returns the revision a history key holds; deleted says it
// is a deletion (its version is kv's mod revision).
func decodeRecord(kv *mvccpb.KeyValue, deleted bool) (storage.Revision, error) {
	r := storage.Revision{Version: strconv.FormatInt(kv.ModRevision, 10), Deleted: deleted}
	b := kv.Value
	var version int64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return r, badRecord(kv)
		}
		b = b[n:]
		switch {
		case num == recResource && typ == protowire.BytesType, num == recCascade && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return r, badRecord(kv)
			}
			b = b[n:]
			if num == recCascade {
				id := new(pbresource.ID)
				if err := proto.Unmarshal(v, id); err != nil {
					return r, badRecord(kv)
				}
				r.CascadeFrom = id
				continue
			}
			res, err := unmarshalResource(v)
			if err != nil || res.Id == nil {
				return r, badRecord(kv)
			}
			r.Resource = res
		case num == recBy && typ == protowire.BytesType:
			v, n := protowire.ConsumeString(b)
			if n < 0 {
				return r, badRecord(kv)
			}
			b, r.By = b[n:], v
		case (num == recTime || num == recVersion || num == recCreated) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return r, badRecord(kv)
			}
			b = b[n:]
			switch num {
			case recTime:
				r.Time = time.Unix(0, int64(v))
			case recVersion:
				version = int64(v)
			default:
				r.Created = v != 0
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return r, badRecord(kv)
			}
			b = b[n:]
		}
	}
	if r.Resource == nil {
		return r, badRecord(kv)
	}
	if deleted {
		r.Resource.Version = strconv.FormatInt(version, 10)
	} else {
		r.Resource.Version = r.Version
	}
	return r, nil
}

func badRecord(kv *mvccpb.KeyValue) error {
	return fmt.Errorf("etcd: the value under %q is not a history record", kv.Key)
}

// recorded reports whether res's changes are recorded: not when history is
// off, nor for the reaper's tombstones.
func (b *Backend) recorded(id *pbresource.ID) bool {
	return b.hist != nil && !isTombstoneType(id.GetType())
}

func isTombstoneType(t *pbresource.Type) bool {
	tt := resource.TypeV1Tombstone
	return t.GetGroup() == tt.Group && t.GetKind() == tt.Kind
}

// withWriteHistory appends to ops the operation that records a write of
// value (res with Uid uid) if it starts a generation: a nested transaction
// that puts the write revision's key if it does not exist (an update), or
// a put (a create: its Uid is new). It returns the operation's index for
// wroteHistory, -1 if nothing is recorded.
func (b *Backend) withWriteHistory(ctx context.Context, ops []clientv3.Op, res *pbresource.Resource, uid string, value []byte, created bool) ([]clientv3.Op, int, error) {
	if !b.recorded(res.Id) {
		return ops, -1, nil
	}
	rec, err := encodeRecord(ctx, value, 0, created)
	if err != nil {
		return nil, -1, err
	}
	hk := b.keys.history(res.Id, uid, res.Generation)
	if created {
		return append(ops, clientv3.OpPut(hk, rec)), len(ops), nil
	}
	return append(ops, clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(hk), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(hk, rec)}, nil)), len(ops), nil
}

// wroteHistory tells the pruner about a committed update whose operation
// i was withWriteHistory's, if it recorded a revision. Creates are not
// counted: a lifetime's first revision needs no pruning, and those of the
// name's earlier lifetimes go with their trash entries.
func (b *Backend) wroteHistory(resp *clientv3.TxnResponse, i int, id *pbresource.ID) {
	if i >= 0 && i < len(resp.Responses) && resp.Responses[i].GetResponseTxn().GetSucceeded() {
		b.pruner.name(b.keys.historyPrefix(id))
	}
}

// deleteHistoryOps returns the operations that record the deletion of kv,
// the stored cur.
func (b *Backend) deleteHistoryOps(ctx context.Context, kv *mvccpb.KeyValue, cur *pbresource.Resource) ([]clientv3.Op, error) {
	if !b.recorded(cur.Id) {
		return nil, nil
	}
	rec, err := encodeRecord(ctx, kv.Value, kv.ModRevision, false)
	if err != nil {
		return nil, err
	}
	ops := []clientv3.Op{clientv3.OpPut(b.keys.trash(cur.Id, cur.Id.Uid), rec)}
	if o := cur.Owner; o != nil && o.Uid != "" && checkSegment("owner uid", o.Uid) == nil {
		ops = append(ops, clientv3.OpPut(b.keys.ownerTrash(o.Uid, cur.Id, cur.Id.Uid), rec))
	}
	return ops, nil
}

// parseVersion parses a version given to a Historian method.
func parseVersion(v string) (int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, errBadVersion
	}
	return n, nil
}

// ReadRevision returns the revision of id's name at version
// (storage.Historian).
func (b *Backend) ReadRevision(ctx context.Context, id *pbresource.ID, version string) (storage.Revision, error) {
	if err := checkID(id); err != nil {
		return storage.Revision{}, err
	}
	v, err := parseVersion(version)
	if err != nil {
		return storage.Revision{}, err
	}
	if b.hist == nil {
		return storage.Revision{}, storage.ErrNotFound
	}
	at := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMinModRev(v), clientv3.WithMaxModRev(v)}
	revs, err := b.readRevisions(ctx, []string{b.keys.historyPrefix(id), b.keys.trashPrefix(id)}, at)
	if err != nil {
		return storage.Revision{}, err
	}
	for _, r := range revs {
		if id.Uid == "" || id.Uid == r.Resource.Id.Uid {
			return r, nil
		}
	}
	return storage.Revision{}, storage.ErrNotFound
}

// readRevisions reads, at one revision, the history keys under each of
// prefixes (history or trash keys, by their directory) with opts, and
// returns their revisions, newest first, without the deletions past the
// retention.
func (b *Backend) readRevisions(ctx context.Context, prefixes []string, opts []clientv3.OpOption) ([]storage.Revision, error) {
	ops := make([]clientv3.Op, len(prefixes))
	for i, p := range prefixes {
		ops[i] = clientv3.OpGet(p, opts...)
	}
	resp, err := b.callTxn(ctx, opTxn, nil, ops, nil)
	if err != nil {
		return nil, readError(ctx, err)
	}
	b.observe(resp.Header.Revision)
	now := time.Now()
	var out []storage.Revision
	for i, p := range prefixes {
		deleted := !strings.HasPrefix(p, b.keys.prefix+historyDir)
		for _, kv := range resp.Responses[i].GetResponseRange().GetKvs() {
			r, err := decodeRecord(kv, deleted)
			if err != nil {
				return nil, err
			}
			if deleted && b.hist.expired(r.Time, now) {
				continue
			}
			out = append(out, r)
		}
	}
	sortNewestFirst(out)
	return out, nil
}

func sortNewestFirst(revs []storage.Revision) {
	slices.SortFunc(revs, func(x, y storage.Revision) int {
		a, _ := strconv.ParseInt(x.Version, 10, 64)
		c, _ := strconv.ParseInt(y.Version, 10, 64)
		return int(min(max(c-a, -1), 1))
	})
}

// pageOpts returns the options of a read of the newest revisions below
// req.Before, one more than req.Limit.
func pageOpts(req storage.RevisionPageRequest) ([]clientv3.OpOption, error) {
	opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend)}
	if req.Before != "" {
		before, err := parseVersion(req.Before)
		if err != nil {
			return nil, err
		}
		if before <= 1 {
			return nil, nil
		}
		opts = append(opts, clientv3.WithMaxModRev(before-1))
	}
	if req.Limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(req.Limit)+1))
	}
	return opts, nil
}

// revisionPage cuts the page of req from revs, newest first, read with
// pageOpts.
func revisionPage(revs []storage.Revision, req storage.RevisionPageRequest) storage.RevisionPage {
	if req.Limit > 0 && len(revs) > req.Limit {
		return storage.RevisionPage{Revisions: revs[:req.Limit], Next: revs[req.Limit-1].Version}
	}
	return storage.RevisionPage{Revisions: revs}
}

// ListRevisions returns the kept revisions of id's name, newest first
// (storage.Historian).
func (b *Backend) ListRevisions(ctx context.Context, id *pbresource.ID, req storage.RevisionPageRequest) (storage.RevisionPage, error) {
	if err := checkID(id); err != nil {
		return storage.RevisionPage{}, err
	}
	opts, err := pageOpts(req)
	if err != nil || opts == nil || b.hist == nil {
		return storage.RevisionPage{}, err
	}
	revs, err := b.readRevisions(ctx, []string{b.keys.historyPrefix(id), b.keys.trashPrefix(id)}, opts)
	if err != nil {
		return storage.RevisionPage{}, err
	}
	return revisionPage(revs, req), nil
}

// ListTrashOwnedBy returns the kept deletions of what owner owned, newest
// first (storage.Historian).
func (b *Backend) ListTrashOwnedBy(ctx context.Context, owner *pbresource.ID, req storage.RevisionPageRequest) (storage.RevisionPage, error) {
	if owner.GetUid() == "" {
		return storage.RevisionPage{}, errors.New("etcd: the owner's Uid is required")
	}
	if err := checkSegment("owner uid", owner.Uid); err != nil {
		return storage.RevisionPage{}, err
	}
	opts, err := pageOpts(req)
	if err != nil || opts == nil || b.hist == nil {
		return storage.RevisionPage{}, err
	}
	revs, err := b.readRevisions(ctx, []string{b.keys.ownerTrashPrefix(owner.Uid)}, opts)
	if err != nil {
		return storage.RevisionPage{}, err
	}
	return revisionPage(revs, req), nil
}

// trashScanChunk is how many trash keys a ListTrash whose filter is not a
// key range reads per request.
const trashScanChunk = 1000

// ListTrash returns the kept deletions of resType in tenancy whose names
// start with namePrefix, newest first (storage.Historian). A tenancy with
// wildcards or a name prefix under one reads the type's trash in chunks,
// newest first, until the page is full.
func (b *Backend) ListTrash(ctx context.Context, resType storage.UnversionedType, tenancy *pbresource.Tenancy, namePrefix string, req storage.RevisionPageRequest) (storage.RevisionPage, error) {
	q, err := b.keys.query(resType, tenancy, namePrefix)
	if err != nil {
		return storage.RevisionPage{}, err
	}
	opts, err := pageOpts(req)
	if err != nil || opts == nil || b.hist == nil || q.empty {
		return storage.RevisionPage{}, err
	}
	prefix := b.keys.prefix + trashDir + strings.TrimPrefix(q.rangePrefix, b.keys.prefix+resourceDir)
	if q.exact {
		revs, err := b.readRevisions(ctx, []string{prefix}, opts)
		if err != nil {
			return storage.RevisionPage{}, err
		}
		return revisionPage(revs, req), nil
	}
	var out []storage.Revision
	maxRev := int64(0)
	if req.Before != "" {
		maxRev, _ = parseVersion(req.Before) // checked by pageOpts
		maxRev--
	}
	var rev int64
	for {
		chunk := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByModRevision, clientv3.SortDescend), clientv3.WithLimit(trashScanChunk)}
		if maxRev > 0 {
			chunk = append(chunk, clientv3.WithMaxModRev(maxRev))
		}
		if rev > 0 {
			chunk = append(chunk, clientv3.WithRev(rev))
		}
		resp, err := b.callGet(ctx, opGet, prefix, chunk...)
		if err != nil {
			return storage.RevisionPage{}, readError(ctx, err)
		}
		rev = resp.Header.Revision
		now := time.Now()
		for _, kv := range resp.Kvs {
			tk, ok := q.split(trimUid(kv.Key))
			if !ok || !q.matches(tk) {
				continue
			}
			r, err := decodeRecord(kv, true)
			if err != nil {
				return storage.RevisionPage{}, err
			}
			if !b.hist.expired(r.Time, now) {
				out = append(out, r)
			}
		}
		if (req.Limit > 0 && len(out) > req.Limit) || !resp.More || len(resp.Kvs) == 0 {
			break
		}
		maxRev = resp.Kvs[len(resp.Kvs)-1].ModRevision - 1
	}
	return revisionPage(out, req), nil
}

// trimUid returns a trash key without its last segment, the Uid: the form
// of a resource key that query.split reads (the directories have the same
// length).
func trimUid(key []byte) []byte {
	if i := strings.LastIndexByte(string(key), '/'); i >= 0 {
		return key[:i]
	}
	return key
}
