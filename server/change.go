package server

import (
	"context"
	"errors"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// named is an Authorizer that names its caller, as acl's do (the token's
// name).
type named interface{ Name() string }

// withChange returns ctx telling a storage.Historian who makes the
// request's backend writes (storage.Change.By): the name of authz, when it
// has one. Without a name ctx is returned as it is, so a request without
// ACLs allocates nothing more.
func withChange(ctx context.Context, authz resource.Authorizer) context.Context {
	n, ok := authz.(named)
	if !ok {
		return ctx
	}
	name := n.Name()
	if name == "" {
		return ctx
	}
	return storage.WithChange(ctx, storage.Change{By: name})
}

// withCascade returns ctx for the deletion of stored: when its owner (the
// lifetime its Uid names) is no longer stored, the deletion is the reaper's
// cascade of the owner's, and ctx says so (storage.Change.CascadeFrom). It
// reads the owner, so it costs a backend read for owned resources only.
// When the read fails otherwise, ctx is returned as it is: the deletion
// goes ahead, recorded as a client's.
func (s *Server) withCascade(ctx context.Context, stored *pbresource.Resource) context.Context {
	owner := stored.Owner
	if owner.GetUid() == "" {
		return ctx
	}
	if _, err := s.backend.Read(ctx, storage.StrongConsistency, owner); !errors.Is(err, storage.ErrNotFound) {
		return ctx
	}
	c := storage.ChangeFrom(ctx)
	c.CascadeFrom = owner
	return storage.WithChange(ctx, c)
}
