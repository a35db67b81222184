package etcd

import (
	"context"
	"fmt"

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

func fenceFrom(ctx context.Context) (fenceToken, bool) {
	f, ok := storage.FenceFrom(ctx)
	return fenceToken{key: f.Key, rev: f.Revision}, ok
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
