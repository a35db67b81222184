package server

import (
	"bytes"
	"context"
	"errors"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// Write creates or updates a resource. See the package documentation for
// the rules; in short: the request is validated and run through the type's
// Mutate, Validate and ACL hooks once, then applied to the stored resource
// in a read-modify-write loop that carries over Uid, status and owner and
// ends in a backend compare-and-swap. A blanket write (empty Version) starts
// over when the CAS loses a race; a versioned write reports Aborted instead.
func (s *Server) Write(ctx context.Context, req *pbresource.WriteRequest) (*pbresource.WriteResponse, error) {
	b := new(writeMessages)
	if err := s.writeResource(ctx, "Write", req.GetResource(), b, false); err != nil {
		return nil, err
	}
	return &b.rsp, nil
}

// Create writes res as Write does, but only as a new resource: when
// something is stored under its name, it is AlreadyExists (and nothing is
// written). res must have neither Version nor Uid. Other Loom services
// use it to bring a resource back (the history service's Restore).
func (s *Server) Create(ctx context.Context, res *pbresource.Resource) (*pbresource.Resource, error) {
	b := new(writeMessages)
	if err := s.writeResource(ctx, "Create", res, b, true); err != nil {
		return nil, err
	}
	return b.rsp.Resource, nil
}

// writeResource writes in, the resource of a Write (or a Create, when
// create is set), and sets b.rsp.Resource to what is stored.
func (s *Server) writeResource(ctx context.Context, method string, in *pbresource.Resource, b *writeMessages, create bool) error {
	authz, err := s.authorizer(ctx)
	if err != nil {
		return s.fail(method, in.GetId(), err)
	}
	ctx, err = s.withFence(ctx, authz)
	if err != nil {
		return s.fail(method, in.GetId(), err)
	}
	ctx = withChange(ctx, authz)
	reg, data, err := s.prepare(in, &b.res)
	if err != nil {
		return s.fail(method, in.GetId(), err)
	}
	res := &b.res
	if err := aclError(reg.AuthorizeWrite(authz, res, data)); err != nil {
		return s.fail(method, res.GetId(), err)
	}
	out, err := s.write(ctx, authz, reg, b, data, create)
	if err != nil {
		return s.fail(method, res.GetId(), err)
	}
	b.rsp.Resource = out
	return nil
}

// writeMessages holds the messages one Write makes, so that they cost one
// allocation. None of them is kept: the backend copies what it stores, and
// the response points at the stored resource (or, when a write finishes a
// deletion, at res).
//
// The name read is res.Id itself (see readStored), so no copy of it
// without its Uid is among them, and the struct takes the 256-byte size
// class instead of 352.
type writeMessages struct {
	res pbresource.Resource // the server's copy of the request's resource (see prepare)
	id  pbresource.ID       // res.Id with the Uid the write gives it, when that takes a copy
	rsp pbresource.WriteResponse
}

// writeIntent is what the caller of Write asked for. The server's copy of
// the request's resource is rebuilt from it on every attempt of the loop.
type writeIntent struct {
	authz    resource.Authorizer  // the caller's
	reg      resource.Registered  // the requested type's
	res      *pbresource.Resource // the server's copy, mutated and validated; reused as the write's message
	idBuf    *pbresource.ID       // where res.Id is copied to give it a Uid (see withUidIn)
	data     proto.Message        // res.Data decoded
	uid      string               // the Uid the caller gave, if any
	version  string               // the Version the caller gave, if any
	status   map[string]*pbresource.Status
	owner    *pbresource.ID
	ownerUid string // the owner's Uid as the caller gave it
	meta     map[string]string
	create   bool // only as a new resource (Create)
}

func (in *writeIntent) cas() bool { return in.version != "" }

// errRetry tells a read-modify-write loop to start over with a fresh,
// strongly consistent read.
var errRetry = errors.New("retry")

// refuse returns refusal if the read it rests on was strongly consistent,
// and errRetry otherwise: a stale read can make an existing resource look
// absent, or a current one look changed, so a refusal is confirmed by a
// strong read before it is sent.
func refuse(consistency storage.ReadConsistency, refusal error) error {
	if consistency == storage.EventualConsistency {
		return errRetry
	}
	return refusal
}

// versionMismatch is the refusal of a compare-and-swap whose version is not
// stored's.
func versionMismatch(version string, stored *pbresource.Resource) error {
	return status.Errorf(codes.Aborted,
		"version %s does not match the stored version %q: the resource changed since it was read",
		resource.Quote(version), stored.Version)
}

func (s *Server) write(ctx context.Context, authz resource.Authorizer, reg resource.Registered, b *writeMessages, data proto.Message, create bool) (*pbresource.Resource, error) {
	res := &b.res
	in := &writeIntent{
		authz:    authz,
		reg:      reg,
		res:      res,
		idBuf:    &b.id,
		data:     data,
		uid:      res.Id.Uid,
		version:  res.Version,
		status:   res.Status,
		owner:    res.Owner,
		ownerUid: res.Owner.GetUid(),
		meta:     res.Metadata,
		create:   create,
	}
	var out *pbresource.Resource
	name := res.Id // before a create attempt gives res a Uid
	if create {
		// A Create expects the name free: try that first, without a read
		// (the backend's compare-and-swap refuses a taken name), and read
		// only if it is not.
		out, err := s.create(ctx, in, storage.EventualConsistency)
		if err != errRetry {
			return out, err
		}
	}
	err := s.readModifyWrite(ctx, name, storage.EventualConsistency, func(stored *pbresource.Resource, consistency storage.ReadConsistency) (err error) {
		if stored == nil {
			out, err = s.create(ctx, in, consistency)
		} else {
			out, err = s.update(ctx, in, stored, consistency)
		}
		return err
	})
	return out, err
}

// readStored reads the resource stored under id's name in whatever
// GroupVersion, and with whatever Uid, it is stored. It returns nil, nil
// when there is none. A Uid in id only saves a copy of id: the backend is
// asked with it first, and without it only when nothing has it.
func (s *Server) readStored(ctx context.Context, consistency storage.ReadConsistency, id *pbresource.ID) (*pbresource.Resource, error) {
	res, err := s.backend.Read(ctx, consistency, id)
	if err == nil {
		return res, nil
	}
	if errors.Is(err, storage.ErrNotFound) {
		if id.Uid != "" {
			return s.readStored(ctx, consistency, withUid(id, ""))
		}
		return nil, nil
	}
	if stored := mismatchedStored(err); stored != nil {
		return stored, nil
	}
	return nil, err
}

// mismatchedStored returns the stored resource of a GroupVersion mismatch
// error, or nil if err is not one.
func mismatchedStored(err error) *pbresource.Resource {
	var gv storage.GroupVersionMismatchError
	if errors.As(err, &gv) {
		return gv.Stored
	}
	var gvp *storage.GroupVersionMismatchError
	if errors.As(err, &gvp) && gvp != nil {
		return gvp.Stored
	}
	return nil
}

// create handles a Write when nothing is stored under the name.
func (s *Server) create(ctx context.Context, in *writeIntent, consistency storage.ReadConsistency) (*pbresource.Resource, error) {
	if in.cas() || in.uid != "" {
		if in.cas() {
			return nil, refuse(consistency, status.Errorf(codes.Aborted,
				"resource %s does not exist, so version %s cannot match; leave version empty to create it",
				resource.ReferenceString(in.res.Id), resource.Quote(in.version)))
		}
		return nil, refuse(consistency, status.Errorf(codes.NotFound,
			"resource %s with uid %s does not exist; leave id.uid empty to create it",
			resource.ReferenceString(in.res.Id), in.uid))
	}
	if len(in.status) > 0 {
		return nil, invalidField("status", "cannot be set by Write; use WriteStatus once the resource exists")
	}
	if _, ok := in.meta[resource.DeletionTimestampKey]; ok {
		return nil, invalidField("metadata."+resource.DeletionTimestampKey, "is set by Delete and cannot be set by Write")
	}
	if err := s.limits.checkMetadata(in.meta, nil); err != nil {
		return nil, err
	}
	if in.owner != nil {
		if err := s.resolveOwner(ctx, in, consistency); err != nil {
			return nil, err
		}
	}

	res := in.res
	uid, gen := resource.NewULIDPair()
	res.Id = withUidIn(res.Id, uid, in.idBuf)
	res.Generation = gen
	res.Version = ""
	res.Status = nil
	res.Owner = in.owner
	res.Metadata = in.meta
	if err := s.limits.checkSize(res, nil, ""); err != nil {
		return nil, err
	}
	out, err := s.backend.WriteCAS(ctx, res)
	if errors.Is(err, storage.ErrCASFailure) || errors.Is(err, storage.ErrWrongUid) {
		// Created concurrently: the next attempt updates it instead.
		return nil, errRetry
	}
	if errors.Is(err, storage.ErrOwnerNotFound) {
		// Deleted since resolveOwner read it; the backend checks at commit.
		return nil, invalidField("owner", "resource %s with uid %s does not exist (it was deleted)",
			resource.ReferenceString(in.owner), in.owner.Uid)
	}
	if err != nil {
		return nil, writeError(false, res, "", err)
	}
	return out, nil
}

// resolveOwner checks that the owner exists (with the given Uid, if any) and
// sets in.owner's Uid to the stored owner's. Naming an owner needs read
// access to it: a caller who may not read it gets PermissionDenied whether
// or not it exists, and errors never tell the stored owner's Uid.
func (s *Server) resolveOwner(ctx context.Context, in *writeIntent, consistency storage.ReadConsistency) error {
	o := in.owner
	name := &pbresource.ID{Type: o.Type, Tenancy: o.Tenancy, Name: o.Name}
	stored, err := s.readStored(ctx, consistency, name)
	if err != nil {
		return storageError(err)
	}
	if err := s.authorizeOwner(in.authz, name, stored); err != nil {
		return err
	}
	if stored == nil {
		return refuse(consistency, invalidField("owner", "resource %s does not exist", resource.ReferenceString(o)))
	}
	if in.ownerUid != "" && stored.Id.Uid != in.ownerUid {
		return refuse(consistency, invalidField("owner", "resource %s with uid %s does not exist (it was deleted, and maybe created again); leave owner.uid empty to name the current one",
			resource.ReferenceString(o), resource.Quote(in.ownerUid)))
	}
	in.owner = withUid(o, stored.Id.Uid)
	return nil
}

// update handles a Write when a resource is stored under the name.
func (s *Server) update(ctx context.Context, in *writeIntent, stored *pbresource.Resource, consistency storage.ReadConsistency) (*pbresource.Resource, error) {
	// The requested type is authorized (Write); a resource stored under
	// another GroupVersion is also authorized as what it is, before
	// anything about it is told.
	if !sameGroupVersion(in.res.Id, stored) {
		if err := s.authorizeWriteAsStored(in.authz, in.reg, stored); err != nil {
			return nil, err
		}
	}
	if in.create {
		return nil, refuse(consistency, status.Errorf(codes.AlreadyExists, "resource %s already exists (uid %s); delete it, or restore it as another version",
			resource.ReferenceString(in.res.Id), stored.Id.Uid))
	}
	if in.uid != "" && in.uid != stored.Id.Uid {
		return nil, status.Errorf(codes.FailedPrecondition,
			"id.uid %s does not match the stored resource's uid %s: the resource was deleted and created again",
			in.uid, stored.Id.Uid)
	}
	if in.cas() && in.version != stored.Version {
		return nil, refuse(consistency, versionMismatch(in.version, stored))
	}
	if len(in.status) > 0 && !resource.EqualStatusMap(in.status, stored.Status) {
		return nil, invalidField("status", "cannot be changed by Write; use WriteStatus (or leave status empty to keep it)")
	}
	if err := checkOwnerUnchanged(in, stored); err != nil {
		return nil, err
	}
	reqTS, reqHas := in.meta[resource.DeletionTimestampKey]
	stTS, stHas := stored.Metadata[resource.DeletionTimestampKey]
	if reqHas != stHas || reqTS != stTS {
		return nil, invalidField("metadata."+resource.DeletionTimestampKey,
			"is set by Delete and cannot be set, changed or removed by Write")
	}

	dataSame := stored.Id.Type.GetGroupVersion() == in.res.Id.Type.GroupVersion &&
		sameData(in.res.Data, in.data, stored.Data)
	metaSame := maps.Equal(in.meta, stored.Metadata)
	if dataSame && metaSame {
		// Nothing changes: no write, no new version, no watch event.
		return stored, nil
	}

	res := in.res
	res.Id = withUidIn(res.Id, stored.Id.Uid, in.idBuf)
	res.Version = stored.Version
	res.Status = stored.Status
	res.Owner = stored.Owner
	res.Metadata = in.meta

	if stHas {
		if err := checkOnlyFinalizersRemoved(in, stored, dataSame); err != nil {
			return nil, err
		}
		if !resource.HasFinalizers(res) {
			// The last finalizer is gone: finish the deletion Delete began.
			// It must be this delete that removes it: one that finds it
			// gone already (another writer finished first, maybe after a
			// status write) lost the race like any other CAS.
			res.Generation = stored.Generation
			if err := s.deleteStored(s.withCascade(ctx, stored), stored, storage.MustExist()); err != nil {
				return nil, casError(in.cas(), err)
			}
			return res, nil
		}
		// Only finalizers were removed: every limit still holds.
	} else if !metaSame {
		if err := s.limits.checkMetadata(in.meta, stored.Metadata); err != nil {
			return nil, err
		}
	}

	res.Generation = resource.NewULID()
	if err := s.limits.checkSize(res, stored, ""); err != nil {
		return nil, err
	}
	out, err := s.backend.WriteCAS(ctx, res)
	if err != nil {
		return nil, writeError(in.cas(), res, "", err)
	}
	return out, nil
}

// writeError maps the error of the backend write of res like casError, and
// a backend's refusal of a too large resource like the size limit's own
// error, naming field (see limits.checkSize).
func writeError(cas bool, res *pbresource.Resource, field string, err error) error {
	if errors.Is(err, storage.ErrTooLarge) {
		return tooLarge(res, storedSize(res), field, 0)
	}
	return casError(cas, err)
}

// casError maps the error of a backend write in a read-modify-write loop: a
// lost race restarts a blanket write and aborts a versioned one.
func casError(cas bool, err error) error {
	if errors.Is(err, storage.ErrCASFailure) || errors.Is(err, storage.ErrWrongUid) {
		if !cas {
			return errRetry
		}
		return status.Error(codes.Aborted, "the resource changed since it was read: "+err.Error())
	}
	return storageError(err)
}

// checkOwnerUnchanged enforces that an owner, once set, is given as stored.
// The caller may leave out the owner's Uid.
func checkOwnerUnchanged(in *writeIntent, stored *pbresource.Resource) error {
	so := stored.Owner
	switch {
	case in.owner == nil && so == nil:
		return nil
	case in.owner == nil:
		return invalidField("owner", "is immutable: the resource is owned by %s; give that owner", resource.IDString(so))
	case so == nil:
		return invalidField("owner", "is immutable: it can only be set when the resource is created")
	}
	o := in.owner
	if resource.EqualUnversionedType(o.Type, so.Type) && resource.EqualTenancy(o.Tenancy, so.Tenancy) &&
		o.Name == so.Name && (in.ownerUid == "" || in.ownerUid == so.Uid) {
		return nil
	}
	return invalidField("owner", "is immutable: the resource is owned by %s, not %s", resource.IDString(so), resource.IDString(o))
}

// checkOnlyFinalizersRemoved enforces the rule for resources marked for
// deletion: a Write may only remove finalizers. Anything else is
// InvalidArgument, Consul's code for it. It takes time linear in the size of
// the metadata, however many finalizers there are.
func checkOnlyFinalizersRemoved(in *writeIntent, stored *pbresource.Resource, dataSame bool) error {
	refuse := func(field, what string) error {
		return invalidField(field, "%s: resource %s is marked for deletion, and a Write may only remove finalizers",
			what, resource.ReferenceString(stored.Id))
	}
	if !dataSame {
		return refuse("data", "cannot change")
	}
	others := 0 // entries of in.meta other than the finalizers, all stored alike
	for k, v := range in.meta {
		if k == resource.FinalizerKey {
			continue
		}
		if sv, ok := stored.Metadata[k]; !ok || sv != v {
			return refuse("metadata", "entries other than finalizers cannot change")
		}
		others++
	}
	storedOthers := len(stored.Metadata)
	if _, ok := stored.Metadata[resource.FinalizerKey]; ok {
		storedOthers--
	}
	if others != storedOthers {
		return refuse("metadata", "entries other than finalizers cannot change")
	}
	raw, storedRaw := in.meta[resource.FinalizerKey], stored.Metadata[resource.FinalizerKey]
	if raw == storedRaw {
		return nil
	}
	if f, added := addedFinalizer(raw, storedRaw); added {
		return refuse("metadata.finalizers", "finalizer "+resource.Quote(f)+" cannot be added")
	}
	return nil
}

// sameData reports whether two Data fields hold equal messages. Equal bytes
// settle it cheaply; otherwise the stored bytes are decoded and compared
// with the already decoded new message, since equal messages need not
// marshal to equal bytes.
func sameData(a *anypb.Any, aMsg proto.Message, b *anypb.Any) bool {
	if b == nil {
		return false
	}
	if a.TypeUrl == b.TypeUrl && bytes.Equal(a.Value, b.Value) {
		return true
	}
	if a.MessageName() != b.MessageName() {
		return false
	}
	bMsg := aMsg.ProtoReflect().New().Interface()
	if err := proto.Unmarshal(b.Value, bMsg); err != nil {
		return false
	}
	return proto.Equal(aMsg, bMsg)
}
