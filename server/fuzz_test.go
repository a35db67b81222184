package server

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// FuzzWrite drives Write's validation and storage paths with arbitrary
// requests against a small fixed world (an owner, a resource marked for
// deletion, a cluster-scoped resource). The invariant: Write never panics;
// it either stores a valid resource or fails with a client-side code, never
// Internal or Unknown.
func FuzzWrite(f *testing.F) {
	barData, _ := proto.Marshal(&pbfoov1.Bar{Baz: "x"})
	zipData, _ := proto.Marshal(&pbfoov1.Zip{Zap: "z"})
	barURL := "type.googleapis.com/loom.example.foo.v1.Bar"
	f.Add("foo", "v1", "Bar", "", "", "a", "", barURL, barData, "", "", "", "", "", "")
	f.Add("foo", "v1", "Bar", "default", "default", "exists", "", barURL, barData, "", "", "finalizers", "", "", "")
	f.Add("foo", "v2", "Bar", "", "ns", "a", "", "type.googleapis.com/loom.example.foo.v2.Bar", barData, "owner", "", "", "", "", "")
	f.Add("foo", "v1", "Zip", "p1", "", "z", "", "type.googleapis.com/loom.example.foo.v1.Zip", zipData, "", "", "k", "v", "", "1")
	f.Add("foo", "v1", "Qux", "", "", "q", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "type.googleapis.com/loom.example.foo.v1.Qux", []byte{}, "", "", "", "", "s", "")
	f.Add("foo", "v1", "Bar", "", "", "a", "", barURL, []byte{0x0a, 0xff}, "owner", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "deletionTimestamp", "x", "", "")

	f.Fuzz(func(t *testing.T, group, version, kind, partition, namespace, name, uid, typeURL string, value []byte,
		ownerName, ownerUid, metaKey, metaValue, statusKey, resVersion string,
	) {
		env := newEnv(t)
		ctx := context.Background()
		setupFuzzWorld(t, env)

		res := &pbresource.Resource{
			Id: &pbresource.ID{
				Type:    &pbresource.Type{Group: group, GroupVersion: version, Kind: kind},
				Tenancy: &pbresource.Tenancy{Partition: partition, Namespace: namespace},
				Name:    name,
				Uid:     uid,
			},
			Data:    &anypb.Any{TypeUrl: typeURL, Value: value},
			Version: resVersion,
		}
		if ownerName != "" {
			res.Owner = &pbresource.ID{Type: zipID("x").Type, Name: ownerName, Uid: ownerUid}
		}
		if metaKey != "" {
			res.Metadata = map[string]string{metaKey: metaValue}
			if metaKey == resource.FinalizerKey {
				// Keep the marked resource's deletion mark so the
				// finalizer-removal path is reachable.
				res.Metadata[resource.DeletionTimestampKey] = fuzzDeletionTimestamp(t, env)
			}
		}
		if statusKey != "" {
			res.Status = map[string]*pbresource.Status{statusKey: {ObservedGeneration: uid}}
		}

		out, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: res})
		if err != nil {
			switch code := status.Code(err); code {
			case codes.InvalidArgument, codes.Aborted, codes.FailedPrecondition, codes.NotFound, codes.PermissionDenied:
			default:
				t.Fatalf("Write failed with %v: %v", code, err)
			}
			return
		}

		got := out.Resource
		reg, ok := env.registry.Resolve(got.Id.Type)
		if !ok {
			t.Fatalf("stored an unregistered type %v", got.Id.Type)
		}
		if err := resource.ValidateName(got.Id.Name); err != nil {
			t.Fatalf("stored an invalid name: %v", err)
		}
		norm, err := resource.NormalizeTenancy("id.tenancy", reg.Scope, got.Id.Tenancy, false)
		if err != nil || !resource.EqualTenancy(norm, got.Id.Tenancy) {
			t.Fatalf("stored a tenancy that does not fit the scope: %v (%v)", got.Id.Tenancy, err)
		}
		if !resource.IsULID(got.Id.Uid) || !resource.IsULID(got.Generation) || got.Version == "" {
			t.Fatalf("stored without uid, generation or version: %v", got)
		}
		if _, _, err := checkData(reg, got.Data); err != nil {
			t.Fatalf("stored data that does not decode: %v", err)
		}
		if got.Owner != nil && !resource.IsULID(got.Owner.Uid) {
			t.Fatalf("stored an owner without uid: %v", got.Owner)
		}
		if _, err := env.client.Read(ctx, &pbresource.ReadRequest{Id: got.Id}); err != nil && !resource.IsMarkedForDeletion(got) {
			t.Fatalf("cannot read back what was written: %v", err)
		}
	})
}

// setupFuzzWorld writes the resources fuzzed Writes may collide with.
func setupFuzzWorld(t *testing.T, env *testEnv) {
	env.write(t, zip(t, "owner"))
	marked := bar(t, "exists", "x")
	marked.Metadata = map[string]string{resource.FinalizerKey: "a b"}
	env.write(t, marked)
	if err := env.delete(t, barID("exists"), ""); err != nil {
		t.Fatal(err)
	}
	env.write(t, qux(t, "q"))
}

func fuzzDeletionTimestamp(t *testing.T, env *testEnv) string {
	return env.mustRead(t, barID("exists")).Metadata[resource.DeletionTimestampKey]
}
