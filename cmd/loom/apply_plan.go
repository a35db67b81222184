package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// Without the bulk service (a Consul server, few documents, -dry-run or -o),
// apply writes one resource at a time. So that a file is not written in part, everything apply can check before
// the first write is checked: each resource by the server's hooks
// (validateAll), and against what is stored (planApply): its uid and
// version when the file gives them, and its owner, which must exist, or be
// created by the same files. What changes between the checks and the
// writes can still fail a write midway, as it would fail one Write.

// applyStep is one document as apply writes it.
type applyStep struct {
	doc     document
	checked *pbresource.Resource // as the server's Mutate hook leaves it
	stored  *pbresource.Resource // as read before the first write; nil: none
}

// validateConcurrency is how many requests apply makes at once while it
// checks the documents.
const validateConcurrency = 8

// forEach runs f(0), ..., f(n-1), validateConcurrency at a time, and
// returns their errors by index.
func forEach(n int, f func(i int) error) []error {
	errs := make([]error, n)
	sem := make(chan struct{}, validateConcurrency)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errs
}

// validateAll runs MutateAndValidate on every document and returns the
// resources as the server's hooks left them. Its error names the first
// document (in file order) the server refused, or is the server's
// Unimplemented.
func validateAll(ctx context.Context, client pbresource.ResourceServiceClient, docs []document) ([]*pbresource.Resource, error) {
	checked := make([]*pbresource.Resource, len(docs))
	errs := forEach(len(docs), func(i int) error {
		resp, err := client.MutateAndValidate(ctx, &pbresource.MutateAndValidateRequest{Resource: docs[i].res})
		checked[i] = resp.GetResource()
		return err
	})
	for i, err := range errs {
		if status.Code(err) == codes.Unimplemented {
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: nothing was written", docs[i].source, errorText(err))
		}
	}
	return checked, nil
}

// readAll reads the resources ids name, consistently; nil for one that
// does not exist.
func readAll(ctx context.Context, client pbresource.ResourceServiceClient, ids []*pbresource.ID) ([]*pbresource.Resource, []error) {
	out := make([]*pbresource.Resource, len(ids))
	errs := forEach(len(ids), func(i int) error {
		res, err := readStored(ctx, client, ids[i])
		out[i] = res
		return err
	})
	return out, errs
}

// readStored reads what is stored under id's type, tenancy and name
// (whatever its uid), consistently; nil when nothing is.
func readStored(ctx context.Context, client pbresource.ResourceServiceClient, id *pbresource.ID) (*pbresource.Resource, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, resource.ConsistencyModeKey, resource.ConsistencyModeConsistent)
	resp, err := client.Read(ctx, &pbresource.ReadRequest{Id: &pbresource.ID{Type: id.Type, Tenancy: id.Tenancy, Name: id.Name}})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	return resp.GetResource(), err
}

// planApply reads what the documents name, checks them against it, and
// returns the steps to write them in: an owner the files create before
// what it owns, file order otherwise. Its error names the first document
// that would fail.
func planApply(ctx context.Context, client pbresource.ResourceServiceClient, docs []document, checked []*pbresource.Resource) ([]applyStep, error) {
	ids := make([]*pbresource.ID, len(docs))
	for i, r := range checked {
		ids[i] = r.Id
	}
	stored, errs := readAll(ctx, client, ids)
	steps := make([]applyStep, len(docs))
	for i, d := range docs {
		if errs[i] != nil {
			return nil, fmt.Errorf("%s: reading the stored resource: %s: nothing was written", d.source, errorText(errs[i]))
		}
		steps[i] = applyStep{doc: d, checked: checked[i], stored: stored[i]}
		if err := checkStored(steps[i]); err != nil {
			return nil, fmt.Errorf("%s: %v: nothing was written", d.source, err)
		}
	}
	ownerIn, err := checkOwners(ctx, client, steps)
	if err != nil {
		return nil, err
	}
	return ownersFirst(steps, ownerIn)
}

// checkStored refuses what the server would refuse of st's write, given
// what is stored: another uid or version than the document's, another
// owner.
func checkStored(st applyStep) error {
	want, stored := st.checked, st.stored
	if stored == nil {
		if want.Version != "" {
			return fmt.Errorf("version %s is given, but the resource does not exist", want.Version)
		}
		return nil
	}
	if want.Id.Uid != "" && want.Id.Uid != stored.Id.Uid {
		return fmt.Errorf("id.uid %s is not the stored resource's: it was deleted and created again", want.Id.Uid)
	}
	if want.Version != "" && want.Version != stored.Version {
		return fmt.Errorf("version %s is not the stored resource's: it changed since it was read", want.Version)
	}
	switch {
	case want.Owner == nil && stored.Owner == nil:
	case stored.Owner == nil:
		return fmt.Errorf("owner is immutable: the stored resource has none")
	case want.Owner == nil || !sameOwner(want.Owner, stored.Owner):
		return fmt.Errorf("owner is immutable: the stored resource is owned by %s", resource.ReferenceString(stored.Owner))
	}
	return nil
}

// checkOwners checks the owner each step names: one in the files (whose
// index it returns, -1 for none) must not be given a uid it will not have;
// any other must exist, with the uid given. Owners not in the files are
// read once each.
func checkOwners(ctx context.Context, client pbresource.ResourceServiceClient, steps []applyStep) ([]int, error) {
	inFiles := map[ownerKey]int{}
	for i, st := range steps {
		inFiles[keyOf(st.checked.Id)] = i
	}
	ownerIn := make([]int, len(steps))
	var toRead []*pbresource.ID
	readIndex := map[ownerKey]int{}
	for i, st := range steps {
		ownerIn[i] = -1
		o := st.checked.Owner
		if o == nil {
			continue
		}
		if j, ok := inFiles[keyOf(o)]; ok {
			ownerIn[i] = j
			continue
		}
		if _, ok := readIndex[keyOf(o)]; !ok {
			readIndex[keyOf(o)] = len(toRead)
			toRead = append(toRead, o)
		}
	}
	owners, errs := readAll(ctx, client, toRead)
	for i, st := range steps {
		o := st.checked.Owner
		if o == nil {
			continue
		}
		var err error
		if j := ownerIn[i]; j >= 0 {
			err = checkOwnerInFiles(o, steps[j])
		} else {
			k := readIndex[keyOf(o)]
			err = checkOwnerStored(o, owners[k], errs[k])
		}
		if err != nil {
			return nil, fmt.Errorf("%s: owner %s: %v: nothing was written", st.doc.source, resource.ReferenceString(o), err)
		}
	}
	return ownerIn, nil
}

func checkOwnerInFiles(o *pbresource.ID, owner applyStep) error {
	switch {
	case o.Uid == "":
		return nil
	case owner.stored == nil:
		return fmt.Errorf("%s creates it, with a new uid: leave owner.uid out", owner.doc.source)
	case o.Uid != owner.stored.Id.Uid:
		return fmt.Errorf("uid %s is not the stored owner's: it was deleted and created again", o.Uid)
	}
	return nil
}

func checkOwnerStored(o *pbresource.ID, stored *pbresource.Resource, err error) error {
	switch {
	case err != nil:
		return fmt.Errorf("reading it: %s", errorText(err))
	case stored == nil:
		return fmt.Errorf("does not exist, and the files do not create it")
	case o.Uid != "" && o.Uid != stored.Id.Uid:
		return fmt.Errorf("uid %s is not the stored owner's: it was deleted and created again", o.Uid)
	}
	return nil
}

// ownersFirst orders steps so that an owner the files create comes before
// what it owns, keeping file order otherwise. Owners that exist already
// need no order; new ones that own each other cannot be created.
func ownersFirst(steps []applyStep, ownerIn []int) ([]applyStep, error) {
	const (
		todo = iota
		visiting
		done
	)
	state := make([]int, len(steps))
	out := make([]applyStep, 0, len(steps))
	var visit func(i int) error
	visit = func(i int) error {
		switch state[i] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("%s: its owners, created by the same files, own it in turn: none of them can be created first; nothing was written", steps[i].doc.source)
		}
		state[i] = visiting
		if j := ownerIn[i]; j >= 0 && steps[j].stored == nil {
			if err := visit(j); err != nil {
				return err
			}
		}
		state[i] = done
		out = append(out, steps[i])
		return nil
	}
	for i := range steps {
		if err := visit(i); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ownerKey names a resource by unversioned type, tenancy and name, with
// empty tenancy units read as their defaults: what an owner reference must
// match. (A Loom server's MutateAndValidate fills them in, as the type's
// scope says; a server that does not leaves them as the files give them.)
type ownerKey struct {
	group, kind, partition, namespace, name string
}

func keyOf(id *pbresource.ID) ownerKey {
	k := ownerKey{
		group: id.GetType().GetGroup(), kind: id.GetType().GetKind(),
		partition: id.GetTenancy().GetPartition(), namespace: id.GetTenancy().GetNamespace(), name: id.GetName(),
	}
	if k.partition == "" {
		k.partition = resource.DefaultPartition
	}
	if k.namespace == "" {
		k.namespace = resource.DefaultNamespace
	}
	return k
}

// sameOwner reports whether the owner reference o names stored, an owner
// as the server stores it (uid set).
func sameOwner(o, stored *pbresource.ID) bool {
	return (o.Uid == "" || o.Uid == stored.Uid) && keyOf(o) == keyOf(stored)
}

// typeFinder finds the message types of data to compare it (typeResolver).
type typeFinder interface {
	protoregistry.MessageTypeResolver
	protoregistry.ExtensionTypeResolver
}

// applyOne writes st's resource, keeping the stored metadata in
// carriedMetadata that the document does not set, and says whether it was
// created, updated or left unchanged. A resource whose data, metadata and
// owner equal the stored ones is not written at all: Consul would give it
// a new generation and version. The write is conditional on the version
// compared with (unless the document gives its own), and compared again
// when another writer came first.
func applyOne(ctx context.Context, client pbresource.ResourceServiceClient, types typeFinder, st applyStep) (*pbresource.Resource, string, error) {
	for attempt := 1; ; attempt++ {
		if st.stored != nil && unchanged(withCarried(st.checked, st.doc, st.stored), st.stored, types) {
			return st.stored, "unchanged", nil
		}
		res := withCarried(st.doc.res, st.doc, st.stored)
		if res.Version == "" && st.stored != nil {
			res.Version = st.stored.Version
		}
		resp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: res})
		if status.Code(err) == codes.Aborted && st.doc.res.Version == "" && attempt < 3 {
			if st.stored, err = readStored(ctx, client, st.checked.Id); err != nil {
				return nil, "", err
			}
			continue
		}
		if err != nil {
			return nil, "", err
		}
		out := resp.Resource
		switch {
		case st.stored == nil || st.stored.Id.Uid != out.Id.Uid:
			return out, "created", nil
		case st.stored.Version == out.Version:
			return out, "unchanged", nil
		default:
			return out, "updated", nil
		}
	}
}

// withCarried returns a copy of res with the stored metadata in
// carriedMetadata that d does not set.
func withCarried(res *pbresource.Resource, d document, stored *pbresource.Resource) *pbresource.Resource {
	res = proto.Clone(res).(*pbresource.Resource)
	for _, k := range carriedMetadata {
		if v, ok := stored.GetMetadata()[k]; ok && !d.setMeta[k] {
			if res.Metadata == nil {
				res.Metadata = map[string]string{}
			}
			res.Metadata[k] = v
		}
	}
	return res
}

// unchanged reports whether a Write of want over stored would change
// nothing: same uid and version when want gives them, and the same
// GroupVersion, data, metadata and owner (the status is WriteStatus's).
func unchanged(want, stored *pbresource.Resource, types typeFinder) bool {
	id := want.Id
	return (id.Uid == "" || id.Uid == stored.Id.Uid) &&
		(want.Version == "" || want.Version == stored.Version) &&
		id.Type.GetGroupVersion() == stored.Id.Type.GetGroupVersion() &&
		maps.Equal(want.Metadata, stored.Metadata) &&
		((want.Owner == nil && stored.Owner == nil) ||
			(want.Owner != nil && stored.Owner != nil && sameOwner(want.Owner, stored.Owner))) &&
		sameData(want.Data, stored.Data, types)
}

// sameData reports whether a and b hold equal messages: the same bytes,
// or, as encodings may differ (map order, say), equal once decoded with
// types.
func sameData(a, b *anypb.Any, types typeFinder) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.MessageName() != b.MessageName() {
		return false
	}
	if bytes.Equal(a.Value, b.Value) {
		return true
	}
	opts := proto.UnmarshalOptions{Resolver: types}
	ma, errA := anypb.UnmarshalNew(a, opts)
	mb, errB := anypb.UnmarshalNew(b, opts)
	return errA == nil && errB == nil && proto.Equal(ma, mb)
}
