package server

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// tombstonePrefix starts the name of every Tombstone.
const tombstonePrefix = "tombstone-"

// TombstoneID returns the ID of the Tombstone written when owner (an ID with
// its Uid) is deleted while it owns resources. The name derives from the
// owner's Uid alone, so it is a valid name however long the owner's name is,
// and deleting the same owner twice names the same tombstone. It lives in
// the owner's partition and namespace, with "default" for units the owner's
// scope lacks.
func TombstoneID(owner *pbresource.ID) *pbresource.ID {
	name := tombstonePrefix + strings.ToLower(owner.GetUid())
	if resource.ValidateName(name) != nil {
		// Uids are ULIDs, which always give a valid name; anything else is
		// hashed so the name stays valid and stable.
		sum := sha256.Sum256([]byte(owner.GetUid()))
		name = tombstonePrefix + hex.EncodeToString(sum[:16])
	}
	ten := &pbresource.Tenancy{
		Partition: owner.GetTenancy().GetPartition(),
		Namespace: owner.GetTenancy().GetNamespace(),
	}
	if ten.Partition == "" {
		ten.Partition = resource.DefaultPartition
	}
	if ten.Namespace == "" {
		ten.Namespace = resource.DefaultNamespace
	}
	return &pbresource.ID{
		Type:    &pbresource.Type{Group: resource.TypeV1Tombstone.Group, GroupVersion: resource.TypeV1Tombstone.GroupVersion, Kind: resource.TypeV1Tombstone.Kind},
		Tenancy: ten,
		Name:    name,
	}
}

// newTombstone returns the Tombstone to store if owner (an ID with its Uid)
// is deleted while it owns resources.
func newTombstone(owner *pbresource.ID) (*pbresource.Resource, error) {
	data, err := anypb.New(&pbresource.Tombstone{Owner: owner})
	if err != nil {
		return nil, err
	}
	id := TombstoneID(owner)
	id.Uid = resource.NewULID()
	return &pbresource.Resource{Id: id, Generation: resource.NewULID(), Data: data}, nil
}
