package etcd

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/loomrt/loom/storage"
)

// ErrFenced means a fenced write or delete (see WithFence) was refused
// because the lease it was made under is no longer held: its election key
// is gone or belongs to another term. Nothing was written. Unlike
// storage.ErrCASFailure, trying again cannot help; the writer has lost
// leadership and should stop. It wraps storage.ErrFenced, the
// backend-agnostic sentinel.
var ErrFenced = fmt.Errorf("etcd: %w (its leader key is gone or belongs to another term)", storage.ErrFenced)

// fenceToken is a leader key and the revision that created it.
type fenceToken struct {
	key string
	rev int64
}

// WithFence returns a context under which WriteCAS and DeleteCAS of an etcd
// Backend succeed only while the etcd key named key exists with create
// revision rev: the token (*Lease).Fence returns for the current term. The
// check is part of the same transaction as the write, so a write either
// lands while that term's leader key exists, before any other member can
// be elected, or fails with ErrFenced. Reads, lists and watches ignore the
// fence. It is storage.WithFence with storage.Fence{Key: key, Revision:
// rev}; the backend honours a fence set either way. A fenced transaction
// is sent and waited for (up to 10 s) even when ctx ends: a term ends just
// when its controllers are cancelled, and the write's outcome should still
// be known.
func WithFence(ctx context.Context, key string, rev int64) context.Context {
	return storage.WithFence(ctx, storage.Fence{Key: key, Revision: rev})
}

// fenceFrom returns the fence of ctx, if any, after checking it
// (CheckFence).
func (b *Backend) fenceFrom(ctx context.Context) (fenceToken, bool, error) {
	f, ok := storage.FenceFrom(ctx)
	if !ok {
		return fenceToken{}, false, nil
	}
	if err := b.CheckFence(f); err != nil {
		return fenceToken{}, false, err
	}
	return fenceToken{key: f.Key, rev: f.Revision}, true, nil
}

// leaderDir follows the backend's prefix in its election key.
const leaderDir = "/leader"

// ElectionKey is the election key of this backend's leader leases: the
// backend's prefix followed by "/leader" ("/loom/leader" by default). Pass
// it to NewLease: the backend accepts fences only for the leader keys of
// elections under it.
func (b *Backend) ElectionKey() string { return b.keys.prefix + leaderDir }

// CheckFence implements storage.FenceChecker: f must name a leader key of
// an election under ElectionKey, that is ElectionKey, "/" and an etcd
// lease ID in hexadecimal, as NewLease's elections create them. Any other
// key is refused with an error wrapping storage.ErrInvalidFence, without
// asking etcd: a fence is then no way to learn whether some key exists.
func (b *Backend) CheckFence(f storage.Fence) error {
	id, ok := strings.CutPrefix(f.Key, b.ElectionKey()+"/")
	if !ok || len(id) == 0 || len(id) > 16 || strings.Trim(id, "0123456789abcdef") != "" {
		return fmt.Errorf("%w: a fence names a leader key under %s", storage.ErrInvalidFence, b.ElectionKey())
	}
	return nil
}

// fenceFailure returns ErrFenced when a failed transaction's fence compare
// is what failed. The fence key's get is the last Else operation (see txn).
func fenceFailure(resp *clientv3.TxnResponse, fence fenceToken, fenced bool) error {
	if !fenced || len(resp.Responses) == 0 {
		return nil
	}
	kvs := resp.Responses[len(resp.Responses)-1].GetResponseRange().GetKvs()
	if len(kvs) == 0 || kvs[0].CreateRevision != fence.rev {
		return ErrFenced
	}
	return nil
}
