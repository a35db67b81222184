package server

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/fnv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// MaxListPageSize is the largest page_size a List or ListByOwner may ask
// for.
const MaxListPageSize = 10000

// maxPageTokenLen bounds the length of a page_token the server decodes.
const maxPageTokenLen = 2048

// List returns the resources of a type stored under the requested
// GroupVersion, in a tenancy ("*" matches every unit; empty units mean
// "default"), whose names start with a prefix. Resources the caller may not
// read are left out, and with label_selector those whose metadata does not
// match it. Results are eventually consistent.
//
// With page_size or page_token, List returns one page of a listing
// consistent at one store version (see ListRequest), when the backend is a
// storage.PagedLister; otherwise it answers with every resource and no
// next_page_token, as a Consul server does. A page is filled up to
// page_size with resources that pass the GroupVersion, selector and ACL
// filters, reading as many backend pages as that takes.
func (s *Server) List(ctx context.Context, req *pbresource.ListRequest) (*pbresource.ListResponse, error) {
	authz, err := s.authorizer(ctx)
	if err != nil {
		return nil, s.fail("List", nil, err)
	}
	reg, tenancy, err := s.CheckListing(req.GetType(), req.GetTenancy())
	if err != nil {
		return nil, s.fail("List", nil, err)
	}
	if req.PageSize > MaxListPageSize {
		return nil, s.fail("List", nil, invalidField("page_size", "%d is above the maximum of %d", req.PageSize, MaxListPageSize))
	}
	sel, err := parseSelector(req.LabelSelector)
	if err != nil {
		return nil, s.fail("List", nil, err)
	}
	hash := selectorHash(listQueryHash(req.Type, tenancy, req.NamePrefix), sel)
	var tok pageToken
	if req.PageToken != "" {
		if tok, err = decodePageToken(req.PageToken, hash); err != nil {
			return nil, s.fail("List", nil, err)
		}
	}
	if err := aclError(reg.AuthorizeList(authz, tenancy)); err != nil {
		return nil, s.fail("List", nil, err)
	}
	keep := func(item *pbresource.Resource) (bool, error) {
		// The selector first: it rules out most of a selective listing
		// without reaching into the ID.
		if !sel.Matches(item.Metadata) || item.Id.Type.GetGroupVersion() != req.Type.GroupVersion {
			return false, nil
		}
		if err := reg.AuthorizeRead(authz, item.Id, item); err != nil {
			if isDenied(err) {
				return false, nil
			}
			return false, s.fail("List", item.Id, aclError(err))
		}
		return true, nil
	}
	typ := storage.UnversionedTypeFrom(req.Type)
	budget := &listBudget{s: s, ctx: ctx, method: "List", paged: req.PageSize > 0 || req.PageToken != ""}
	defer budget.release()

	pl, paged := s.backend.(storage.PagedLister)
	if !paged {
		budget.paged = false // the backend answers with everything
		items, err := s.backend.List(ctx, storage.EventualConsistency, typ, tenancy, req.NamePrefix)
		if err != nil {
			return nil, s.fail("List", nil, storageError(err))
		}
		out := make([]*pbresource.Resource, 0, len(items))
		for _, item := range items {
			ok, err := keep(item)
			if err == nil && ok {
				_, err = budget.add(item)
			}
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, item)
			}
		}
		return &pbresource.ListResponse{Resources: out}, nil
	}

	list := func(preq storage.PageRequest) (storage.Page, error) {
		page, err := pl.ListPage(ctx, typ, tenancy, req.NamePrefix, preq)
		if err != nil {
			return page, s.fail("List", nil, pageError(err))
		}
		return page, nil
	}
	out, version, next, err := fillPage(int(req.PageSize), storage.PageRequest{Version: tok.version, After: tok.after, Labels: sel.Prefilter()}, list, keep, budget, storage.PageKeyOf)
	if err != nil {
		return nil, err
	}
	rsp := &pbresource.ListResponse{Resources: out, Version: version}
	if next != nil {
		rsp.NextPageToken = pageToken{version: version, after: next}.encode(hash)
	}
	return rsp, nil
}

// fillPage reads backend pages with list, starting at from, until size
// resources (0: no limit) passed keep, the budget is full, or the listing
// ended. It returns them, the listing's version, and where the next page
// starts: nil when the listing ended, else after the last resource looked
// at (or kept, when the budget is full). Errors are list's, keep's and
// the budget's, as they return them.
func fillPage(size int, from storage.PageRequest, list func(storage.PageRequest) (storage.Page, error), keep func(*pbresource.Resource) (bool, error), budget *listBudget, keyOf func(*pbresource.ID) storage.PageKey) ([]*pbresource.Resource, string, *storage.PageKey, error) {
	preq := from
	preq.Limit = size
	var out []*pbresource.Resource
	for {
		page, err := list(preq)
		if err != nil {
			return nil, "", nil, err
		}
		preq.Version = page.Version
		if out == nil {
			out = make([]*pbresource.Resource, 0, len(page.Resources))
		}
		for i, item := range page.Resources {
			ok, err := keep(item)
			if err != nil {
				return nil, "", nil, err
			}
			if ok {
				fits, err := budget.add(item)
				if err != nil {
					return nil, "", nil, err
				}
				if !fits {
					next := keyOf(out[len(out)-1].Id)
					return out, page.Version, &next, nil
				}
				out = append(out, item)
			}
			if size > 0 && len(out) == size && (i < len(page.Resources)-1 || page.More) {
				// Full, and more may follow.
				next := keyOf(item.Id)
				return out, page.Version, &next, nil
			}
		}
		if !page.More {
			return out, page.Version, nil, nil
		}
		last := page.Last
		preq.After = &last
	}
}

// pageError maps a ListPage error to a status: a version the store no
// longer has (or never had: the server restarted) means listing again.
func pageError(err error) error {
	switch {
	case errors.Is(err, storage.ErrVersionGone):
		return status.Errorf(codes.Aborted, "page_token: the listing's version is no longer in the store (%v): list again from the first page", err)
	case errors.Is(err, storage.ErrFutureVersion):
		return status.Errorf(codes.Aborted, "page_token: the listing's version is ahead of the store (did the server restart?): list again from the first page")
	case errors.Is(err, storage.ErrInvalidVersion):
		return invalidField("page_token", "not a token this server issued")
	}
	return storageError(err)
}

// pageToken is what a next_page_token holds: the listing's version and the
// key the next page starts after. Its encoding also holds a hash of the
// query, so that a token is refused for another query.
type pageToken struct {
	version string
	after   *storage.PageKey
}

// The first byte of an encoded token: a List token's key has no type, a
// ListByOwner token's has one.
const (
	pageTokenFormat  = 1
	ownerTokenFormat = 2
)

// encode renders t, a List token, with the query's hash as URL-safe
// base64: the format byte, the hash (8 bytes), then the version,
// partition, namespace and name, each with its length as a uvarint before
// it.
func (t pageToken) encode(hash uint64) string {
	return encodeToken(pageTokenFormat, hash, t.version, t.after.Partition, t.after.Namespace, t.after.Name)
}

// encodeOwned renders t, a ListByOwner token, as encode does with the
// key's group and kind before its partition.
func (t pageToken) encodeOwned(hash uint64) string {
	a := t.after
	return encodeToken(ownerTokenFormat, hash, t.version, a.Type.Group, a.Type.Kind, a.Partition, a.Namespace, a.Name)
}

func encodeToken(format byte, hash uint64, fields ...string) string {
	b := make([]byte, 0, 64)
	b = append(b, format)
	b = binary.BigEndian.AppendUint64(b, hash)
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePageToken parses a page_token of the List query with the given
// hash, or returns an InvalidArgument status naming the field.
func decodePageToken(s string, hash uint64) (pageToken, error) {
	f, err := decodeToken(s, pageTokenFormat, hash, 4, "type, tenancy or name_prefix")
	if err != nil {
		return pageToken{}, err
	}
	return pageToken{
		version: f[0],
		after:   &storage.PageKey{Partition: f[1], Namespace: f[2], Name: f[3]},
	}, nil
}

// decodeOwnerPageToken parses a page_token of a ListByOwner of the owner
// with the given hash (ownerQueryHash), or returns an InvalidArgument
// status naming the field.
func decodeOwnerPageToken(s string, hash uint64) (pageToken, error) {
	f, err := decodeToken(s, ownerTokenFormat, hash, 6, "owner")
	if err != nil {
		return pageToken{}, err
	}
	return pageToken{
		version: f[0],
		after: &storage.PageKey{
			Type:      storage.UnversionedType{Group: f[1], Kind: f[2]},
			Partition: f[3], Namespace: f[4], Name: f[5],
		},
	}, nil
}

// decodeToken returns the n fields of a token of the format and hash; the
// first, the version, is not empty. query names what the hash covers.
func decodeToken(s string, format byte, hash uint64, n int, query string) ([]string, error) {
	bad := func(why string) ([]string, error) {
		return nil, invalidField("page_token", "%s", why)
	}
	if len(s) > maxPageTokenLen {
		return bad("too long to be a token this server issued")
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 9 || b[0] != format {
		return bad("malformed: not a next_page_token of this server")
	}
	if binary.BigEndian.Uint64(b[1:9]) != hash {
		return bad("issued for another " + query)
	}
	b = b[9:]
	fields := make([]string, n)
	for i := range fields {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return bad("malformed: not a next_page_token of this server")
		}
		fields[i] = string(b[k : k+int(l)])
		b = b[k+int(l):]
	}
	if len(b) != 0 || fields[0] == "" {
		return bad("malformed: not a next_page_token of this server")
	}
	return fields, nil
}

// listQueryHash is a hash of what selects a listing's resources: the type
// with its GroupVersion, the normalized tenancy and the name prefix.
func listQueryHash(typ *pbresource.Type, tenancy *pbresource.Tenancy, prefix string) uint64 {
	h := fnv.New64a()
	for _, f := range [...]string{typ.Group, typ.GroupVersion, typ.Kind, tenancy.GetPartition(), tenancy.GetNamespace(), prefix} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// ownerQueryHash is a hash of the owner a ListByOwner lists: its type
// (without GroupVersion, which does not change what it owns), tenancy, name
// and Uid.
func ownerQueryHash(owner *pbresource.ID) uint64 {
	h := fnv.New64a()
	t, ten := owner.GetType(), owner.GetTenancy()
	for _, f := range [...]string{t.GetGroup(), t.GetKind(), ten.GetPartition(), ten.GetNamespace(), owner.GetName(), owner.GetUid()} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// ListByOwner returns the resources owned by the owner (which must be given
// with its Uid), of any type, leaving out those the caller may not read and
// those label_selector does not match.
// The caller needs list access to the owner's type in the owner's tenancy,
// as on Consul. Results are eventually consistent.
//
// When the backend is a storage.OwnerPagedLister, the answer is consistent
// at one store version (ListByOwnerResponse.version), and page_size and
// page_token page it as they page List: the token is bound to the owner, a
// page is filled up to page_size with resources the caller may read, and
// a version the store no longer has is Aborted. Otherwise the answer is
// every resource the owner index names, read one by one, and no
// next_page_token, as a Consul server does.
func (s *Server) ListByOwner(ctx context.Context, req *pbresource.ListByOwnerRequest) (*pbresource.ListByOwnerResponse, error) {
	authz, err := s.authorizer(ctx)
	if err != nil {
		return nil, s.fail("ListByOwner", req.GetOwner(), err)
	}
	ownerReg, owner, err := s.checkID("owner", req.GetOwner())
	if err != nil {
		return nil, s.fail("ListByOwner", req.GetOwner(), err)
	}
	if owner.Uid == "" {
		return nil, s.fail("ListByOwner", owner, invalidArgument(resource.ErrInvalidField{Name: "owner.uid", Wrapped: resource.ErrMissing}))
	}
	// Consul's rule: listing what an owner owns is listing the owner's
	// type, in the owner's tenancy; what is listed is then filtered by read
	// access, item by item.
	if err := aclError(ownerReg.AuthorizeList(authz, owner.Tenancy)); err != nil {
		return nil, s.fail("ListByOwner", owner, err)
	}
	if req.PageSize > MaxListPageSize {
		return nil, s.fail("ListByOwner", owner, invalidField("page_size", "%d is above the maximum of %d", req.PageSize, MaxListPageSize))
	}
	sel, err := parseSelector(req.LabelSelector)
	if err != nil {
		return nil, s.fail("ListByOwner", owner, err)
	}
	hash := selectorHash(ownerQueryHash(owner), sel)
	var tok pageToken
	if req.PageToken != "" {
		if tok, err = decodeOwnerPageToken(req.PageToken, hash); err != nil {
			return nil, s.fail("ListByOwner", owner, err)
		}
	}
	keep := func(child *pbresource.Resource) (bool, error) {
		if !sel.Matches(child.Metadata) {
			return false, nil
		}
		// A type not registered (any longer) gets the default check.
		reg, _ := s.registry.Resolve(child.Id.Type)
		if err := reg.AuthorizeRead(authz, child.Id, child); err != nil {
			if isDenied(err) {
				return false, nil
			}
			return false, s.fail("ListByOwner", child.Id, aclError(err))
		}
		return true, nil
	}

	budget := &listBudget{s: s, ctx: ctx, method: "ListByOwner", paged: req.PageSize > 0 || req.PageToken != ""}
	defer budget.release()
	ol, paged := s.backend.(storage.OwnerPagedLister)
	if !paged {
		budget.paged = false // the backend answers with everything
		return s.listByOwnerUnpaged(ctx, owner, keep, budget)
	}
	list := func(preq storage.PageRequest) (storage.Page, error) {
		page, err := ol.ListOwnedPage(ctx, owner, preq)
		if err != nil {
			return page, s.fail("ListByOwner", owner, pageError(err))
		}
		return page, nil
	}
	out, version, next, err := fillPage(int(req.PageSize), storage.PageRequest{Version: tok.version, After: tok.after, Labels: sel.Prefilter()}, list, keep, budget, storage.OwnedPageKeyOf)
	if err != nil {
		return nil, err
	}
	rsp := &pbresource.ListByOwnerResponse{Resources: out, Version: version}
	if next != nil {
		rsp.NextPageToken = pageToken{version: version, after: next}.encodeOwned(hash)
	}
	return rsp, nil
}

// listByOwnerUnpaged answers ListByOwner from the owner index and an
// eventually consistent read of each resource it names, for a backend
// that does not list an owner's resources in pages.
func (s *Server) listByOwnerUnpaged(ctx context.Context, owner *pbresource.ID, keep func(*pbresource.Resource) (bool, error), budget *listBudget) (*pbresource.ListByOwnerResponse, error) {
	ids, err := s.backend.OwnerReferences(ctx, owner)
	if err != nil {
		return nil, s.fail("ListByOwner", owner, storageError(err))
	}
	out := make([]*pbresource.Resource, 0, len(ids))
	for _, id := range ids {
		child, err := s.readStored(ctx, storage.EventualConsistency, id)
		if err != nil {
			return nil, s.fail("ListByOwner", owner, storageError(err))
		}
		// Skip what vanished or changed hands since the index was read.
		if child == nil || child.Owner.GetUid() != owner.Uid || (id.Uid != "" && child.Id.Uid != id.Uid) {
			continue
		}
		ok, err := keep(child)
		if err == nil && ok {
			_, err = budget.add(child)
		}
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, child)
		}
	}
	return &pbresource.ListByOwnerResponse{Resources: out}, nil
}
