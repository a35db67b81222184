package etcd

import (
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
