package server

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// The fuzz tests of this file drive one RPC each with arbitrary requests
// (the fuzzer's bytes, decoded as the request message; bytes that do not
// decode are skipped) against the small world of setupRPCFuzzWorld. After
// every request: no panic, no Internal or Unknown error, the store's
// invariants hold (checkStoreInvariants), and a request that was refused,
// or that only reads, left the store as it was.

// fuzzedRefusals are the codes a refused request may get.
var fuzzedRefusals = map[codes.Code]bool{
	codes.InvalidArgument: true, codes.Aborted: true, codes.FailedPrecondition: true,
	codes.NotFound: true, codes.PermissionDenied: true,
}

// setupRPCFuzzWorld writes the world of FuzzWrite plus a Bar owned by the
// Zip "owner", and returns the stored resources the seeds address.
func setupRPCFuzzWorld(t *testing.T, env *testEnv) (owner, child *pbresource.Resource) {
	t.Helper()
	setupFuzzWorld(t, env)
	owner = env.mustRead(t, zipID("owner"))
	c := bar(t, "child", "c")
	c.Owner = owner.Id
	child = env.write(t, c)
	return owner, child
}

// fuzzRequest decodes data into a new message like seed, or reports false.
func fuzzRequest[M proto.Message](data []byte, msg M) (M, bool) {
	if err := proto.Unmarshal(data, msg); err != nil {
		return msg, false
	}
	return msg, true
}

// addSeeds adds the encoding of each request as a seed.
func addSeeds(f *testing.F, reqs ...proto.Message) {
	for _, r := range reqs {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// storeTypes are the types stored in the fuzz world.
var storeTypes = []*pbresource.Type{barID("").Type, zipID("").Type, quxID("").Type, resource.TypeV1Tombstone}

// storeState returns every stored resource, by ID (without Uid).
func storeState(t *testing.T, env *testEnv) map[string]*pbresource.Resource {
	t.Helper()
	out := make(map[string]*pbresource.Resource)
	all := &pbresource.Tenancy{Partition: storage.Wildcard, Namespace: storage.Wildcard}
	for _, typ := range storeTypes {
		items, err := env.backend.List(context.Background(), storage.EventualConsistency, storage.UnversionedTypeFrom(typ), all, "")
		if err != nil {
			t.Fatalf("listing %s: %v", resource.TypeString(typ), err)
		}
		for _, r := range items {
			out[resource.ReferenceString(r.Id)] = r
		}
	}
	return out
}

// requireUnchanged fails unless the store holds exactly what before held.
func requireUnchanged(t *testing.T, env *testEnv, before map[string]*pbresource.Resource, what string) {
	t.Helper()
	after := storeState(t, env)
	for k, r := range before {
		if a, ok := after[k]; !ok || !proto.Equal(a, r) {
			t.Fatalf("%s changed %s: was %v, now %v", what, k, r, a)
		}
	}
	for k, a := range after {
		if _, ok := before[k]; !ok {
			t.Fatalf("%s stored %s: %v", what, k, a)
		}
	}
}

// checkStoreInvariants fails unless every stored resource has a Uid, a
// Generation and a Version, reads back through the service as stored, and
// its owner, if any, is stored with its Uid or has left a Tombstone, and
// lists it among its owned resources.
func checkStoreInvariants(t *testing.T, env *testEnv) {
	t.Helper()
	ctx := context.Background()
	state := storeState(t, env)
	for k, r := range state {
		if !resource.IsULID(r.Id.Uid) || !resource.IsULID(r.Generation) || r.Version == "" {
			t.Fatalf("%s stored without uid, generation or version: %v", k, r)
		}
		got, err := env.server.Read(ctx, &pbresource.ReadRequest{Id: r.Id})
		if err != nil || !proto.Equal(got.Resource, r) {
			t.Fatalf("%s does not read back as stored: %v (%v)", k, got.GetResource(), err)
		}
		if r.Owner == nil {
			continue
		}
		o, ok := state[resource.ReferenceString(r.Owner)]
		if !ok || o.Id.Uid != r.Owner.Uid {
			if _, ok := state[resource.ReferenceString(TombstoneID(r.Owner))]; !ok {
				t.Fatalf("%s is owned by %v, which is gone without a tombstone", k, r.Owner)
			}
		}
		owned, err := env.backend.OwnerReferences(ctx, r.Owner)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, id := range owned {
			found = found || resource.EqualID(id, r.Id)
		}
		if !found {
			t.Fatalf("%s is owned by %v, whose owner index lacks it: %v", k, r.Owner, owned)
		}
	}
}

// checkFuzzedResult fails if err is not a refusal; for a refusal, or when
// readOnly, the store must be unchanged. Then the invariants must hold.
func checkFuzzedResult(t *testing.T, env *testEnv, method string, before map[string]*pbresource.Resource, err error, readOnly bool) {
	t.Helper()
	if err != nil && !fuzzedRefusals[status.Code(err)] {
		t.Fatalf("%s failed with %v: %v", method, status.Code(err), err)
	}
	if err != nil || readOnly {
		requireUnchanged(t, env, before, method)
	}
	checkStoreInvariants(t, env)
}

func FuzzRead(f *testing.F) {
	addSeeds(f,
		&pbresource.ReadRequest{Id: barID("exists")},
		&pbresource.ReadRequest{Id: barV2ID("child")},
		&pbresource.ReadRequest{Id: zipID("owner")},
		&pbresource.ReadRequest{Id: quxID("q")},
		&pbresource.ReadRequest{Id: &pbresource.ID{Type: resource.TypeV1Tombstone, Name: "x"}},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req, ok := fuzzRequest(data, new(pbresource.ReadRequest))
		if !ok {
			return
		}
		env := newEnv(t)
		setupRPCFuzzWorld(t, env)
		before := storeState(t, env)
		out, err := env.client.Read(context.Background(), req)
		if err == nil && !proto.Equal(out.Resource, before[resource.ReferenceString(out.Resource.Id)]) {
			t.Fatalf("Read returned %v, which is not stored", out.Resource)
		}
		checkFuzzedResult(t, env, "Read", before, err, true)
	})
}

func FuzzWriteStatus(f *testing.F) {
	gen := "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	addSeeds(f,
		&pbresource.WriteStatusRequest{Id: barID("child"), Key: "k", Status: &pbresource.Status{ObservedGeneration: gen}},
		&pbresource.WriteStatusRequest{Id: zipID("owner"), Key: "k", Version: "3", Status: &pbresource.Status{
			ObservedGeneration: gen, Conditions: []*pbresource.Condition{{Type: "Ready", State: pbresource.Condition_STATE_TRUE}},
		}},
		&pbresource.WriteStatusRequest{Id: barV2ID("exists"), Key: "a b", Status: &pbresource.Status{}},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req, ok := fuzzRequest(data, new(pbresource.WriteStatusRequest))
		if !ok {
			return
		}
		env := newEnv(t)
		_, child := setupRPCFuzzWorld(t, env)
		if req.Id != nil && req.Id.Uid == "fill" {
			// Let the fuzzer reach the write path with the right Uid.
			req.Id.Uid = child.Id.Uid
		}
		before := storeState(t, env)
		out, err := env.client.WriteStatus(context.Background(), req)
		checkFuzzedResult(t, env, "WriteStatus", before, err, false)
		if err != nil {
			return
		}
		k := resource.ReferenceString(out.Resource.Id)
		was := before[k]
		if was == nil || out.Resource.Generation != was.Generation || !proto.Equal(out.Resource.Data, was.Data) ||
			out.Resource.Status[req.Key].GetObservedGeneration() != req.Status.GetObservedGeneration() {
			t.Fatalf("WriteStatus stored %v over %v", out.Resource, was)
		}
		delete(before, k)
		after := storeState(t, env)
		delete(after, k)
		if len(after) != len(before) {
			t.Fatalf("WriteStatus changed other resources")
		}
	})
}

func FuzzList(f *testing.F) {
	addSeeds(f,
		&pbresource.ListRequest{Type: barID("").Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}},
		&pbresource.ListRequest{Type: zipID("").Type, NamePrefix: "ow"},
		&pbresource.ListRequest{Type: quxID("").Type, Tenancy: &pbresource.Tenancy{}},
		&pbresource.ListRequest{Type: resource.TypeV1Tombstone, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "*"}},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req, ok := fuzzRequest(data, new(pbresource.ListRequest))
		if !ok {
			return
		}
		env := newEnv(t)
		setupRPCFuzzWorld(t, env)
		before := storeState(t, env)
		out, err := env.client.List(context.Background(), req)
		if err == nil {
			for _, r := range out.Resources {
				if !proto.Equal(r, before[resource.ReferenceString(r.Id)]) || r.Id.Type.GroupVersion != req.Type.GroupVersion {
					t.Fatalf("List returned %v, which is not stored under the requested type", r)
				}
			}
		}
		checkFuzzedResult(t, env, "List", before, err, true)
	})
}

func FuzzListByOwner(f *testing.F) {
	addSeeds(f,
		&pbresource.ListByOwnerRequest{Owner: &pbresource.ID{Type: zipID("").Type, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "owner", Uid: "fill"}},
		&pbresource.ListByOwnerRequest{Owner: zipID("owner")},
		&pbresource.ListByOwnerRequest{Owner: &pbresource.ID{Type: barID("").Type, Name: "child", Uid: "01ARZ3NDEKTSV4RRFFQ69G5FAV"}},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req, ok := fuzzRequest(data, new(pbresource.ListByOwnerRequest))
		if !ok {
			return
		}
		env := newEnv(t)
		owner, _ := setupRPCFuzzWorld(t, env)
		if req.Owner != nil && req.Owner.Uid == "fill" {
			req.Owner.Uid = owner.Id.Uid
		}
		before := storeState(t, env)
		out, err := env.client.ListByOwner(context.Background(), req)
		if err == nil {
			for _, r := range out.Resources {
				if !proto.Equal(r, before[resource.ReferenceString(r.Id)]) || r.Owner.GetUid() != req.Owner.Uid {
					t.Fatalf("ListByOwner returned %v, which is not stored with that owner", r)
				}
			}
		}
		checkFuzzedResult(t, env, "ListByOwner", before, err, true)
	})
}

func FuzzDelete(f *testing.F) {
	addSeeds(f,
		&pbresource.DeleteRequest{Id: zipID("owner")},
		&pbresource.DeleteRequest{Id: barID("child"), Version: "5"},
		&pbresource.DeleteRequest{Id: barV2ID("exists")},
		&pbresource.DeleteRequest{Id: &pbresource.ID{Type: zipID("").Type, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "owner", Uid: "fill"}},
		&pbresource.DeleteRequest{Id: quxID("q"), Version: "1"},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req, ok := fuzzRequest(data, new(pbresource.DeleteRequest))
		if !ok {
			return
		}
		env := newEnv(t)
		owner, _ := setupRPCFuzzWorld(t, env)
		if req.Id != nil && req.Id.Uid == "fill" {
			req.Id.Uid = owner.Id.Uid
		}
		before := storeState(t, env)
		_, err := env.client.Delete(context.Background(), req)
		checkFuzzedResult(t, env, "Delete", before, err, false)
		if err != nil {
			return
		}
		// Whatever was deleted is gone or marked; nothing else changed but
		// a tombstone.
		after := storeState(t, env)
		changed := 0
		for k, r := range before {
			a, ok := after[k]
			switch {
			case !ok:
				changed++
			case !proto.Equal(a, r):
				if !resource.IsMarkedForDeletion(a) || resource.IsMarkedForDeletion(r) {
					t.Fatalf("Delete changed %s to %v", k, a)
				}
				changed++
			}
		}
		for k, a := range after {
			if _, ok := before[k]; !ok && a.Id.Type.Kind != resource.TypeV1Tombstone.Kind {
				t.Fatalf("Delete stored %s", k)
			}
		}
		if changed > 1 {
			t.Fatalf("Delete changed %d resources", changed)
		}
	})
}

func FuzzWatchList(f *testing.F) {
	addSeeds(f,
		&pbresource.WatchListRequest{Type: barID("").Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}},
		&pbresource.WatchListRequest{Type: zipID("").Type, NamePrefix: "o"},
		&pbresource.WatchListRequest{Type: barV2ID("").Type, Tenancy: &pbresource.Tenancy{Namespace: "default"}},
		&pbresource.WatchListRequest{Type: &pbresource.Type{Group: "foo", GroupVersion: "v9", Kind: "Bar"}},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req, ok := fuzzRequest(data, new(pbresource.WatchListRequest))
		if !ok {
			return
		}
		env := newEnv(t)
		setupRPCFuzzWorld(t, env)
		before := storeState(t, env)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stream, err := env.client.WatchList(ctx, req)
		for err == nil {
			var ev *pbresource.WatchEvent
			ev, err = stream.Recv()
			if err != nil {
				break
			}
			if ev.GetEndOfSnapshot() != nil {
				break
			}
			r := ev.GetUpsert().GetResource()
			if r == nil || !proto.Equal(r, before[resource.ReferenceString(r.Id)]) ||
				!resource.EqualUnversionedType(r.Id.Type, req.Type) {
				t.Fatalf("WatchList's snapshot holds %v, which is not stored under the requested type", ev)
			}
		}
		cancel()
		if errors.Is(err, io.EOF) {
			t.Fatal("WatchList ended without an error")
		}
		checkFuzzedResult(t, env, "WatchList", before, err, true)
	})
}

func FuzzMutateAndValidate(f *testing.F) {
	r := bar(f, "a", "Hello")
	r.Metadata = map[string]string{resource.FinalizerKey: "x y"}
	addSeeds(f,
		&pbresource.MutateAndValidateRequest{Resource: r},
		&pbresource.MutateAndValidateRequest{Resource: zip(f, "z")},
		&pbresource.MutateAndValidateRequest{Resource: barV2(f, "b", "")},
		&pbresource.MutateAndValidateRequest{Resource: &pbresource.Resource{Id: &pbresource.ID{Type: resource.TypeV1Tombstone, Name: "t"}}},
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		req, ok := fuzzRequest(data, new(pbresource.MutateAndValidateRequest))
		if !ok {
			return
		}
		env := newEnv(t)
		setupRPCFuzzWorld(t, env)
		before := storeState(t, env)
		out, err := env.client.MutateAndValidate(context.Background(), req)
		checkFuzzedResult(t, env, "MutateAndValidate", before, err, true)
		if err != nil {
			return
		}
		// What it accepts, a Write's request checks accept too: a Write of
		// it is refused, if at all, only for what is stored.
		_, werr := env.client.Write(context.Background(), &pbresource.WriteRequest{Resource: out.Resource})
		if werr != nil && !fuzzedRefusals[status.Code(werr)] {
			t.Fatalf("Write of what MutateAndValidate accepted failed with %v: %v", status.Code(werr), werr)
		}
	})
}
