package bulk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pbbulkv1 "github.com/loomrt/loom/proto/pbbulk/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// outcome is what an import does, or did, with one resource.
type outcome int

const (
	created outcome = iota
	updated
	unchanged
)

// item is one resource of an import.
type item struct {
	index   int
	in      *pbresource.Resource // as received
	checked *pbresource.Resource // the server's copy, as the hooks left it
	data    proto.Message        // checked.Data decoded
	stored  *pbresource.Resource // as read while checking; nil: none
	owner   int                  // the index of its owner in the import; -1: none
	outcome outcome
	err     error // its rejection, a status
}

// importer is one Import under way.
type importer struct {
	s        *Service
	authz    resource.Authorizer
	opts     *pbbulkv1.ImportOptions
	items    []*item
	byName   map[nameKey]int
	preserve bool
	// listed holds what is stored of the types the import has many
	// resources of (see prefetch), read in one listing each.
	listed map[storage.UnversionedType]map[nameKey]*pbresource.Resource
}

// Prefetching: a type the import has at least prefetchMin resources of is
// listed once, rather than read once per resource, unless it holds more
// than prefetchRatio times as many.
const (
	prefetchMin   = 64
	prefetchRatio = 4
)

// Import implements pbbulkv1.BulkServiceServer.
func (s *Service) Import(stream grpc.ClientStreamingServer[pbbulkv1.ImportRequest, pbbulkv1.ImportResponse]) error {
	const method = "Import"
	ctx := stream.Context()
	select {
	case s.slot <- struct{}{}:
		defer func() { <-s.slot }()
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	authz, err := s.srv.Authorizer(ctx)
	if err != nil {
		return s.srv.Fail(method, nil, err)
	}
	imp := &importer{s: s, authz: authz}
	if err := imp.receive(stream); err != nil {
		return s.srv.Fail(method, nil, err)
	}
	if imp.preserve && !resource.HasCapability(authz, resource.CapabilityRestore) {
		return s.srv.Fail(method, nil, status.Error(codes.PermissionDenied,
			"options.preserve: this caller may not import resources as exported (with an ACL file, a token needs a {capability: restore} rule); import without -preserve"))
	}
	imp.check(ctx)
	rsp := imp.response()
	if rsp.Rejected > 0 || imp.opts.GetDryRun() {
		return stream.SendAndClose(rsp)
	}
	if err := imp.write(ctx); err != nil {
		return s.srv.Fail(method, nil, err)
	}
	return stream.SendAndClose(imp.response())
}

// receive reads the stream to its end, within the limits.
func (imp *importer) receive(stream grpc.ClientStreamingServer[pbbulkv1.ImportRequest, pbbulkv1.ImportResponse]) error {
	lim := imp.s.limits
	size := 0
	for first := true; ; first = false {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if first {
			imp.opts = req.Options
			imp.preserve = req.Options.GetPreserve()
		} else if req.Options != nil {
			return status.Error(codes.InvalidArgument, "options: only the first message of an Import sets them")
		}
		size += proto.Size(req)
		if size > lim.MaxBytes || len(imp.items)+len(req.Resources) > lim.MaxItems {
			return status.Errorf(codes.ResourceExhausted,
				"the import is larger than this server takes (%d resources, %d bytes); split it into several imports", lim.MaxItems, lim.MaxBytes)
		}
		for _, r := range req.Resources {
			imp.items = append(imp.items, &item{index: len(imp.items), in: r, owner: -1})
		}
	}
	return nil
}

// forEach runs f on items, the Service's Workers at a time, until ctx ends.
func (imp *importer) forEach(ctx context.Context, items []*item, f func(*item)) {
	next := make(chan *item)
	var wg sync.WaitGroup
	for range min(imp.s.limits.Workers, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range next {
				f(it)
			}
		}()
	}
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		next <- it
	}
	close(next)
	wg.Wait()
}

// check checks every item, setting its err when it is rejected.
func (imp *importer) check(ctx context.Context) {
	imp.prefetch(ctx)
	imp.forEach(ctx, imp.items, func(it *item) { it.err = imp.checkOne(ctx, it) })
	if err := ctx.Err(); err != nil {
		for _, it := range imp.items {
			if it.err == nil && it.checked == nil {
				it.err = status.FromContextError(err).Err()
			}
		}
		return
	}
	imp.checkNames()
	imp.checkOwners(ctx)
	imp.checkCycles()
}

// checkOne checks it by itself and against what is stored under its name.
func (imp *importer) checkOne(ctx context.Context, it *item) error {
	srv := imp.s.srv
	reg, checked, data, err := srv.CheckWrite(imp.authz, it.in)
	if err != nil {
		return err
	}
	it.checked, it.data = checked, data
	if imp.preserve {
		if checked.Id.Uid == "" {
			return invalid("id.uid", "is required with preserve (an export gives it)")
		}
		if checked.Owner != nil && checked.Owner.Uid == "" {
			return invalid("owner.uid", "is required with preserve (an export gives it)")
		}
	} else {
		checked.Status = nil // the controllers', as apply leaves it
	}
	if listed, ok := imp.listed[storage.UnversionedTypeFrom(checked.Id.Type)]; ok {
		it.stored = listed[nameOf(checked.Id)]
	} else if it.stored, err = srv.ReadStored(ctx, storage.EventualConsistency, checked.Id); err != nil {
		return storageStatus(err)
	}
	if it.stored != nil && it.stored.Id.Type.GroupVersion != checked.Id.Type.GroupVersion {
		if err := srv.AuthorizeWriteAsStored(imp.authz, reg, it.stored); err != nil {
			return err
		}
	}
	if imp.preserve {
		return it.classifyPreserved()
	}
	return it.classify()
}

// prefetch lists the types the import has many resources of (see
// prefetchMin), as an eventually consistent read would read them. A type
// that holds many more than the import is left to reads one by one, and so
// is any whose listing fails.
func (imp *importer) prefetch(ctx context.Context) {
	pl, ok := imp.s.srv.Backend().(storage.PagedLister)
	if !ok {
		return
	}
	count := map[storage.UnversionedType]int{}
	for _, it := range imp.items {
		count[storage.UnversionedTypeFrom(it.in.GetId().GetType())]++
	}
	imp.listed = map[storage.UnversionedType]map[nameKey]*pbresource.Resource{}
	all := &pbresource.Tenancy{Partition: resource.Wildcard, Namespace: resource.Wildcard}
	for typ, n := range count {
		if n < prefetchMin {
			continue
		}
		listed := make(map[nameKey]*pbresource.Resource, n)
		req := storage.PageRequest{Limit: exportPage}
		for {
			page, err := pl.ListPage(ctx, typ, all, "", req)
			if err != nil || len(listed)+len(page.Resources) > prefetchRatio*n {
				listed = nil
				break
			}
			for _, r := range page.Resources {
				listed[nameOf(r.Id)] = r
			}
			if !page.More {
				break
			}
			last := page.Last
			req.Version, req.After = page.Version, &last
		}
		if listed != nil {
			imp.listed[typ] = listed
		}
	}
}

// checkNames rejects a second resource of a name.
func (imp *importer) checkNames() {
	imp.byName = make(map[nameKey]int, len(imp.items))
	for _, it := range imp.items {
		if it.checked == nil {
			continue
		}
		k := nameOf(it.checked.Id)
		if first, ok := imp.byName[k]; ok {
			if it.err == nil {
				it.err = status.Errorf(codes.InvalidArgument, "id: %s is also resource %d of the import",
					resource.ReferenceString(it.checked.Id), first)
			}
			continue
		}
		imp.byName[k] = it.index
	}
}

// checkOwners checks the owner of every item: one in the import (whose
// index it records), or one stored, read once and readable by the caller.
func (imp *importer) checkOwners(ctx context.Context) {
	type read struct {
		res *pbresource.Resource
		err error
	}
	reads := map[nameKey]read{}
	for _, it := range imp.items {
		o := it.checked.GetOwner()
		if it.err != nil || o == nil {
			continue
		}
		k := nameOf(o)
		if j, ok := imp.byName[k]; ok {
			it.owner = j
			it.err = imp.checkOwnerImported(o, imp.items[j])
			continue
		}
		r, ok := reads[k]
		if !ok {
			r.res, r.err = imp.readOwner(ctx, o)
			reads[k] = r
		}
		switch {
		case r.err != nil:
			it.err = r.err
		case r.res == nil:
			it.err = invalid("owner", "resource %s does not exist, and the import does not create it", resource.ReferenceString(o))
		case o.Uid != "" && o.Uid != r.res.Id.Uid:
			it.err = invalid("owner", "resource %s with uid %s does not exist (it was deleted, and maybe created again)",
				resource.ReferenceString(o), resource.Quote(o.Uid))
		}
	}
}

// readOwner reads the stored owner o, which the caller must be allowed to
// read, as a Write naming it must.
func (imp *importer) readOwner(ctx context.Context, o *pbresource.ID) (*pbresource.Resource, error) {
	srv := imp.s.srv
	res, err := srv.ReadStored(ctx, storage.EventualConsistency, o)
	if err != nil {
		return nil, storageStatus(err)
	}
	reg, ok := srv.Registry().Resolve(o.Type)
	if !ok {
		return res, nil // checked by CheckWrite; a type gone since
	}
	if err := reg.AuthorizeRead(imp.authz, o, res); err != nil {
		return nil, aclStatus(err)
	}
	return res, nil
}

// checkOwnerImported checks the owner reference o of an item against
// owner, the item of the import it names.
func (imp *importer) checkOwnerImported(o *pbresource.ID, owner *item) error {
	if owner.err != nil {
		return invalid("owner", "resource %s is resource %d of the import, which is rejected", resource.ReferenceString(o), owner.index)
	}
	want := ""
	switch {
	case imp.preserve:
		want = owner.checked.Id.Uid
	case owner.stored != nil:
		want = owner.stored.Id.Uid
	case o.Uid != "":
		return invalid("owner.uid", "resource %d of the import creates the owner, with a new uid: leave owner.uid out", owner.index)
	}
	if o.Uid != "" && o.Uid != want {
		return invalid("owner.uid", "%s is not the uid of resource %s", resource.Quote(o.Uid), resource.ReferenceString(o))
	}
	return nil
}

// checkCycles rejects items whose owners in the import own them in turn.
func (imp *importer) checkCycles() {
	const (
		todo = iota
		visiting
		done
	)
	state := make([]int, len(imp.items))
	var visit func(i int) bool // false: on a cycle
	visit = func(i int) bool {
		switch state[i] {
		case done:
			return true
		case visiting:
			return false
		}
		state[i] = visiting
		ok := true
		if j := imp.items[i].owner; j >= 0 {
			ok = visit(j)
		}
		state[i] = done
		if !ok && imp.items[i].err == nil {
			imp.items[i].err = invalid("owner", "the resources that own it in the import own it in turn: none can be written first")
		}
		return ok
	}
	for i := range imp.items {
		visit(i)
	}
}

// response counts the outcomes, or the rejections.
func (imp *importer) response() *pbbulkv1.ImportResponse {
	rsp := &pbbulkv1.ImportResponse{DryRun: imp.opts.GetDryRun()}
	for _, it := range imp.items {
		if it.err == nil {
			continue
		}
		rsp.Rejected++
		if len(rsp.Rejections) == imp.s.limits.MaxRejections {
			rsp.RejectionsOmitted++
			continue
		}
		st := status.Convert(it.err)
		rsp.Rejections = append(rsp.Rejections, &pbbulkv1.Rejection{
			Index: uint64(it.index), Id: it.in.GetId(), Code: uint32(st.Code()), Reason: st.Message(),
		})
	}
	if rsp.Rejected > 0 {
		return rsp
	}
	rsp.Outcomes = make([]pbbulkv1.Outcome, len(imp.items))
	for i, it := range imp.items {
		switch it.outcome {
		case created:
			rsp.Created++
			rsp.Outcomes[i] = pbbulkv1.Outcome_OUTCOME_CREATED
		case updated:
			rsp.Updated++
			rsp.Outcomes[i] = pbbulkv1.Outcome_OUTCOME_UPDATED
		case unchanged:
			rsp.Unchanged++
			rsp.Outcomes[i] = pbbulkv1.Outcome_OUTCOME_UNCHANGED
		}
	}
	return rsp
}

// write writes the items, owners before what they own.
func (imp *importer) write(ctx context.Context) error {
	levels := imp.levels()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if imp.preserve {
		// The backend writes of a Write: fenced as asked, the caller
		// named to the history. (Without preserve, each Write does it.)
		wctx, err := imp.s.srv.WriteContext(ctx, imp.authz)
		if err != nil {
			return err
		}
		ctx = wctx
	}
	var (
		mu       sync.Mutex
		firstErr error
		failed   *item
		written  int
	)
	for _, level := range levels {
		imp.forEach(ctx, level, func(it *item) {
			err := imp.writeOne(ctx, it)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				if it.outcome != unchanged {
					written++
				}
				return
			}
			if firstErr == nil {
				firstErr, failed = err, it
				cancel()
			}
		})
		if firstErr != nil {
			break
		}
	}
	if firstErr == nil {
		return ctx.Err()
	}
	st := status.Convert(firstErr)
	return status.Errorf(st.Code(), "the import stopped after writing %d resource(s): resource %d (%s): %s; what was written stays: run the import again to complete it",
		written, failed.index, resource.ReferenceString(failed.checked.Id), st.Message())
}

// levels groups the items to write by depth of ownership in the import:
// those whose owners are not in it first, then those they own, and so on.
func (imp *importer) levels() [][]*item {
	depth := make([]int, len(imp.items))
	for i := range depth {
		depth[i] = -1
	}
	var depthOf func(i int) int
	depthOf = func(i int) int {
		if depth[i] < 0 {
			depth[i] = 0
			if j := imp.items[i].owner; j >= 0 {
				depth[i] = depthOf(j) + 1
			}
		}
		return depth[i]
	}
	var levels [][]*item
	for i, it := range imp.items {
		d := depthOf(i)
		for len(levels) <= d {
			levels = append(levels, nil)
		}
		if it.outcome != unchanged {
			levels[d] = append(levels[d], it)
		}
	}
	return levels
}

// writeOne writes it, as its outcome says.
func (imp *importer) writeOne(ctx context.Context, it *item) error {
	if imp.preserve {
		return imp.create(ctx, it)
	}
	return imp.apply(ctx, it)
}

// nameKey names a resource by unversioned type, tenancy (normalized) and
// name: what an owner reference, or a duplicate, matches.
type nameKey struct {
	group, kind, partition, namespace, name string
}

func nameOf(id *pbresource.ID) nameKey {
	return nameKey{
		group: id.GetType().GetGroup(), kind: id.GetType().GetKind(),
		partition: id.GetTenancy().GetPartition(), namespace: id.GetTenancy().GetNamespace(), name: id.GetName(),
	}
}

// invalid is the InvalidArgument of field, as the ResourceService words it.
func invalid(field, format string, args ...any) error {
	return status.Error(codes.InvalidArgument, resource.ErrInvalidField{Name: field, Wrapped: fmt.Errorf(format, args...)}.Error())
}
