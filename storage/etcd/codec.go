package etcd

import (
	"fmt"
	"runtime"
	"strconv"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"golang.org/x/sync/errgroup"

	"github.com/loomrt/loom/internal/pbdecode"
	"github.com/loomrt/loom/proto/pbresource"
)

// Decoding is most of what a List, a WatchList snapshot or a watch event
// costs on top of etcd itself (see the W9 results in docs/performance.md),
// so stored resources are decoded by internal/pbdecode, whose results are
// always the generic protobuf decoder's. Only the decoding is special, never
// the encoding: what etcd holds is the standard protobuf encoding of a
// Resource (backend.go's marshalOptions), so data stored by any version
// decodes.

// unmarshalResource decodes a stored resource. The result's strings and
// Data.Value share b; b must not change afterwards.
func unmarshalResource(b []byte) (*pbresource.Resource, error) {
	return pbdecode.Resource(b)
}

// decode returns the resource stored in kv, with its Version.
func decode(kv *mvccpb.KeyValue) (*pbresource.Resource, error) {
	return decodeWith(nil, kv)
}

// rangeDecoder decodes the resources of one read of many (a range, an
// etcd watch response): a pbdecode.RangeDecoder, and the version string of
// the last resource, which the next one shares when it has the same mod
// revision (the resources written by one transaction do).
type rangeDecoder struct {
	pbdecode.RangeDecoder
	rev     int64
	version string
}

// versionOf returns the Version of a resource stored at mod revision rev.
func (d *rangeDecoder) versionOf(rev int64) string {
	if rev != d.rev || d.version == "" {
		d.rev, d.version = rev, strconv.FormatInt(rev, 10)
	}
	return d.version
}

// decodeWith is decode with the rangeDecoder of a read of many, if d is not
// nil.
func decodeWith(d *rangeDecoder, kv *mvccpb.KeyValue) (*pbresource.Resource, error) {
	var res *pbresource.Resource
	var err error
	if d != nil {
		res, err = d.Resource(kv.Value)
	} else {
		res, err = unmarshalResource(kv.Value)
	}
	if err != nil {
		return nil, fmt.Errorf("etcd: decoding the resource stored under %q: %w", kv.Key, err)
	}
	if res.Id == nil || res.Id.Type == nil {
		return nil, fmt.Errorf("etcd: the value under %q is not a resource", kv.Key)
	}
	if d != nil {
		res.Version = d.versionOf(kv.ModRevision)
	} else {
		res.Version = strconv.FormatInt(kv.ModRevision, 10)
	}
	return res, nil
}

// parallelDecodeMin is the least number of values decodeChunks spreads
// over several goroutines.
const parallelDecodeMin = 1024

// decodeChunks calls decode for consecutive chunks of [0, n), each with a
// rangeDecoder of its own: on up to GOMAXPROCS goroutines when n is large
// (decoding is most of the cost of a large List, WatchList snapshot or
// catch-up), else on the caller's. It returns the first error.
func decodeChunks(n int, decode func(d *rangeDecoder, start, end int) error) error {
	workers := min(runtime.GOMAXPROCS(0), n/parallelDecodeMin)
	if workers <= 1 {
		var d rangeDecoder
		return decode(&d, 0, n)
	}
	var g errgroup.Group
	chunk := (n + workers - 1) / workers
	for start := 0; start < n; start += chunk {
		end := min(start+chunk, n)
		g.Go(func() error {
			var d rangeDecoder
			return decode(&d, start, end)
		})
	}
	return g.Wait()
}

// decodeAll decodes kvs (see decodeChunks).
func decodeAll(kvs []*mvccpb.KeyValue) ([]*pbresource.Resource, error) {
	out := make([]*pbresource.Resource, len(kvs))
	err := decodeChunks(len(kvs), func(d *rangeDecoder, start, end int) error {
		for i := start; i < end; i++ {
			res, err := decodeWith(d, kvs[i])
			if err != nil {
				return err
			}
			out[i] = res
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
