package bulk

import (
	"context"
	"errors"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage"
)

// carriedMetadata are the metadata keys an import without preserve keeps
// from the stored resource when the imported one does not have them, as
// `loom apply` does: what controllers and Delete add.
var carriedMetadata = [...]string{resource.FinalizerKey, resource.DeletionTimestampKey}

// withCarried returns meta (as given, which says which keys the import
// sets) with the stored entries of carriedMetadata it does not have. It
// returns meta itself when there are none to add.
func withCarried(meta map[string]string, stored *pbresource.Resource) map[string]string {
	out := meta
	for _, k := range carriedMetadata {
		v, ok := stored.GetMetadata()[k]
		if _, set := meta[k]; !ok || set {
			continue
		}
		if len(out) == len(meta) {
			out = maps.Clone(meta)
			if out == nil {
				out = map[string]string{}
			}
		}
		out[k] = v
	}
	return out
}

// classify checks the item of an import without preserve against what is
// stored, as a Write would, and sets its outcome.
func (it *item) classify() error {
	want, stored := it.checked, it.stored
	ref := resource.ReferenceString(want.Id)
	if stored == nil {
		switch {
		case want.Version != "":
			return status.Errorf(codes.Aborted, "resource %s does not exist, so version %s cannot match; leave version empty to create it",
				ref, resource.Quote(want.Version))
		case want.Id.Uid != "":
			return status.Errorf(codes.NotFound, "resource %s with uid %s does not exist; leave id.uid empty to create it", ref, want.Id.Uid)
		}
		if _, ok := want.Metadata[resource.DeletionTimestampKey]; ok {
			return invalid("metadata."+resource.DeletionTimestampKey, "is set by Delete and cannot be set by Write")
		}
		it.outcome = created
		return nil
	}
	if want.Id.Uid != "" && want.Id.Uid != stored.Id.Uid {
		return status.Errorf(codes.FailedPrecondition,
			"id.uid %s does not match the stored resource's uid %s: the resource was deleted and created again", want.Id.Uid, stored.Id.Uid)
	}
	if want.Version != "" && want.Version != stored.Version {
		return status.Errorf(codes.Aborted, "version %s does not match the stored version %q: the resource changed since it was read",
			resource.Quote(want.Version), stored.Version)
	}
	if err := checkOwnerUnchanged(want.Owner, stored.Owner); err != nil {
		return err
	}
	meta := withCarried(want.Metadata, stored)
	if meta[resource.DeletionTimestampKey] != stored.Metadata[resource.DeletionTimestampKey] {
		return invalid("metadata."+resource.DeletionTimestampKey, "is set by Delete and cannot be set, changed or removed by Write")
	}
	dataSame := want.Id.Type.GroupVersion == stored.Id.Type.GroupVersion && server.SameData(want.Data, it.data, stored.Data)
	if dataSame && maps.Equal(meta, stored.Metadata) {
		it.outcome = unchanged
		return nil
	}
	if _, marked := stored.Metadata[resource.DeletionTimestampKey]; marked && (!dataSame || !equalBut(meta, stored.Metadata, resource.FinalizerKey)) {
		return invalid("metadata", "resource %s is marked for deletion, and a Write may only remove finalizers", ref)
	}
	it.outcome = updated
	return nil
}

// classifyPreserved checks the item of an import with preserve against what
// is stored, and sets its outcome: created when the name is free,
// unchanged when the same resource is stored.
func (it *item) classifyPreserved() error {
	want, stored := it.checked, it.stored
	if stored == nil {
		it.outcome = created
		return nil
	}
	same := stored.Id.Uid == want.Id.Uid &&
		want.Id.Type.GroupVersion == stored.Id.Type.GroupVersion &&
		server.SameData(want.Data, it.data, stored.Data) &&
		maps.Equal(want.Metadata, stored.Metadata) &&
		sameOwner(want.Owner, stored.Owner) &&
		resource.EqualStatusMap(want.Status, stored.Status)
	if !same {
		return status.Errorf(codes.AlreadyExists,
			"resource %s is stored (uid %s), unlike the one imported: an import with preserve only creates; delete it first, or import without preserve",
			resource.ReferenceString(want.Id), stored.Id.Uid)
	}
	it.outcome = unchanged
	return nil
}

// checkOwnerUnchanged enforces that an owner, once set, is given as stored
// (its Uid may be left out), as a Write does.
func checkOwnerUnchanged(o, stored *pbresource.ID) error {
	switch {
	case o == nil && stored == nil:
		return nil
	case o == nil:
		return invalid("owner", "is immutable: the resource is owned by %s; give that owner", resource.IDString(stored))
	case stored == nil:
		return invalid("owner", "is immutable: it can only be set when the resource is created")
	case nameOf(o) != nameOf(stored) || (o.Uid != "" && o.Uid != stored.Uid):
		return invalid("owner", "is immutable: the resource is owned by %s, not %s", resource.IDString(stored), resource.IDString(o))
	}
	return nil
}

// sameOwner reports whether two owner references name the same lifetime.
func sameOwner(a, b *pbresource.ID) bool {
	if a == nil || b == nil {
		return a == b
	}
	return nameOf(a) == nameOf(b) && a.Uid == b.Uid
}

// equalBut reports whether a and b are equal but for key.
func equalBut(a, b map[string]string, key string) bool {
	n := 0
	for k, v := range a {
		if k == key {
			continue
		}
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
		n++
	}
	if _, ok := b[key]; ok {
		return n == len(b)-1
	}
	return n == len(b)
}

// apply writes the item of an import without preserve as `loom apply`
// does: a Write with the carried metadata, conditional on the version
// compared with, compared again (up to three times) when another writer
// came first and the import gave no version of its own.
func (imp *importer) apply(ctx context.Context, it *item) error {
	if it.stored == nil {
		// Absent when checked: a Create, which needs no read, unless the
		// name was taken meanwhile.
		in := it.in
		_, err := imp.s.srv.Create(ctx, &pbresource.Resource{Id: in.Id, Owner: in.Owner, Data: in.Data, Metadata: in.Metadata})
		if status.Code(err) != codes.AlreadyExists {
			return err
		}
		if it.stored, err = imp.s.srv.ReadStored(ctx, storage.StrongConsistency, it.checked.Id); err != nil {
			return storageStatus(err)
		}
		if err := it.classify(); err != nil || it.outcome == unchanged {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		in := it.in
		res := &pbresource.Resource{Id: in.Id, Owner: in.Owner, Data: in.Data, Metadata: withCarried(in.Metadata, it.stored), Version: in.Version}
		if res.Version == "" && it.stored != nil {
			res.Version = it.stored.Version
		}
		_, err := imp.s.srv.Write(ctx, &pbresource.WriteRequest{Resource: res})
		if status.Code(err) != codes.Aborted || in.Version != "" || attempt == 3 {
			return err
		}
		if it.stored, err = imp.s.srv.ReadStored(ctx, storage.StrongConsistency, it.checked.Id); err != nil {
			return storageStatus(err)
		}
		if err := it.classify(); err != nil || it.outcome == unchanged {
			return err
		}
	}
}

// create writes the item of an import with preserve, as given but for its
// version, straight to the backend: no Write may set a Uid or a status.
func (imp *importer) create(ctx context.Context, it *item) error {
	c := it.checked
	gen := c.Generation
	if gen == "" {
		gen = resource.NewULID()
	}
	res := &pbresource.Resource{Id: c.Id, Owner: c.Owner, Data: c.Data, Metadata: c.Metadata, Status: c.Status, Generation: gen}
	_, err := imp.s.srv.Backend().WriteCAS(ctx, res)
	switch {
	case errors.Is(err, storage.ErrCASFailure) || errors.Is(err, storage.ErrWrongUid):
		return status.Errorf(codes.AlreadyExists, "resource %s was created while the import ran", resource.ReferenceString(c.Id))
	case errors.Is(err, storage.ErrOwnerNotFound):
		return invalid("owner", "resource %s with uid %s does not exist (it was deleted while the import ran)",
			resource.ReferenceString(c.Owner), c.Owner.GetUid())
	case err != nil:
		return server.WriteStatusError(res, err)
	}
	return nil
}

func storageStatus(err error) error { return server.StorageStatus(err) }
func aclStatus(err error) error     { return server.ACLStatus(err) }
