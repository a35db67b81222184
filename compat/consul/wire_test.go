package consul_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	pbauth "github.com/hashicorp/consul/proto-public/pbauth/v2beta1"
	consulpb "github.com/hashicorp/consul/proto-public/pbresource"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/inmem"
)

// loomServer serves a Loom ResourceService (in memory, with the example
// types and any extra registrations) over real gRPC on an in-process
// listener and returns a connection to it.
func loomServer(t *testing.T, extra ...func(resource.Registry) error) *grpc.ClientConn {
	t.Helper()
	registry := resource.NewRegistry()
	if err := foo.RegisterTypes(registry); err != nil {
		t.Fatal(err)
	}
	for _, register := range extra {
		if err := register(registry); err != nil {
			t.Fatal(err)
		}
	}
	svc := server.New(server.Config{Backend: inmem.New(), Registry: registry})
	gs := grpc.NewServer()
	svc.Register(gs)
	lis := bufconn.Listen(1 << 20)
	go gs.Serve(lis)
	t.Cleanup(func() { svc.Shutdown(); gs.Stop() })
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

var (
	consulBarType = &consulpb.Type{Group: "foo", GroupVersion: "v1", Kind: "Bar"}
	consulDefault = &consulpb.Tenancy{Partition: "default", Namespace: "default"}
)

func consulBar(t *testing.T, name, baz string) *consulpb.Resource {
	t.Helper()
	data, err := anypb.New(&pbfoov1.Bar{Baz: baz})
	if err != nil {
		t.Fatal(err)
	}
	return &consulpb.Resource{Id: &consulpb.ID{Type: consulBarType, Tenancy: consulDefault, Name: name}, Data: data}
}

func bazOf(t *testing.T, res *consulpb.Resource) string {
	t.Helper()
	var bar pbfoov1.Bar
	if err := res.GetData().UnmarshalTo(&bar); err != nil {
		t.Fatalf("data of %v: %v", res.GetId(), err)
	}
	return bar.Baz
}

func recv(t *testing.T, w consulpb.ResourceService_WatchListClient) *consulpb.WatchEvent {
	t.Helper()
	ev, err := w.Recv()
	if err != nil {
		t.Fatalf("WatchList Recv: %v", err)
	}
	return ev
}

// Consul's generated client drives a Loom server: Write, Read, WatchList,
// WriteStatus, ListByOwner, MutateAndValidate, Delete and List.
func TestConsulClientAgainstLoomServer(t *testing.T) {
	client := consulpb.NewResourceServiceClient(loomServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	wrote, err := client.Write(ctx, &consulpb.WriteRequest{Resource: consulBar(t, "one", "Hello Consul")})
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if wrote.Resource.GetVersion() == "" || wrote.Resource.GetId().GetUid() == "" || wrote.Resource.GetGeneration() == "" {
		t.Errorf("written resource lacks a version, uid or generation: %v", wrote.Resource)
	}
	if got := bazOf(t, wrote.Resource); got != "hello consul" {
		t.Errorf("written baz = %q, want the Mutate hook's %q", got, "hello consul")
	}

	read, err := client.Read(ctx, &consulpb.ReadRequest{Id: wrote.Resource.Id})
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if !proto.Equal(read.Resource, wrote.Resource) {
		t.Errorf("Read returned %v, want what Write returned (%v)", read.Resource, wrote.Resource)
	}

	watch, err := client.WatchList(ctx, &consulpb.WatchListRequest{
		Type:    consulBarType,
		Tenancy: &consulpb.Tenancy{Partition: "*", Namespace: "*"},
	})
	if err != nil {
		t.Fatalf("WatchList: %v", err)
	}
	if ev := recv(t, watch); !proto.Equal(ev.GetUpsert().GetResource(), wrote.Resource) {
		t.Fatalf("first watch event = %v, want the upsert of %q", ev, "one")
	}
	eos := recv(t, watch)
	if eos.GetEndOfSnapshot() == nil {
		t.Fatalf("second watch event = %v, want EndOfSnapshot", eos)
	}
	// Loom's EndOfSnapshot carries its version (a field Consul's proto does
	// not have): Consul's client keeps it as an unknown field and goes on.
	if len(eos.GetEndOfSnapshot().ProtoReflect().GetUnknown()) == 0 {
		t.Errorf("EndOfSnapshot has no unknown field: did Loom stop sending its version? %v", eos)
	}

	st, err := client.WriteStatus(ctx, &consulpb.WriteStatusRequest{
		Id: wrote.Resource.Id, Key: "consul-client",
		Status: &consulpb.Status{ObservedGeneration: wrote.Resource.Generation, Conditions: []*consulpb.Condition{{Type: "Seen", State: consulpb.Condition_STATE_TRUE}}},
	})
	if err != nil || st.Resource.GetStatus()["consul-client"].GetObservedGeneration() != wrote.Resource.Generation {
		t.Fatalf("WriteStatus: %v %v", st, err)
	}
	if ev := recv(t, watch); !proto.Equal(ev.GetUpsert().GetResource(), st.Resource) {
		t.Fatalf("watch event after WriteStatus = %v, want the status write", ev)
	}
	wrote.Resource = st.Resource
	owned, err := client.ListByOwner(ctx, &consulpb.ListByOwnerRequest{Owner: wrote.Resource.Id})
	if err != nil || len(owned.Resources) != 0 {
		t.Errorf("ListByOwner: %v %v, want none", owned, err)
	}
	two, err := client.Write(ctx, &consulpb.WriteRequest{Resource: consulBar(t, "two", "Two")})
	if err != nil {
		t.Fatalf("Write two: %v", err)
	}
	if ev := recv(t, watch); !proto.Equal(ev.GetUpsert().GetResource(), two.Resource) {
		t.Fatalf("live watch event = %v, want the upsert of %q", ev, "two")
	}

	mv, err := client.MutateAndValidate(ctx, &consulpb.MutateAndValidateRequest{Resource: consulBar(t, "three", "MIXED")})
	if err != nil || bazOf(t, mv.GetResource()) != "mixed" {
		t.Errorf("MutateAndValidate: %v %v, want baz lower-cased", mv, err)
	}
	_, err = client.Write(ctx, &consulpb.WriteRequest{Resource: consulBar(t, "empty", "")})
	if err == nil || !strings.Contains(err.Error(), "baz") {
		t.Errorf("Write with empty baz: %v, want the Validate hook's error naming baz", err)
	}

	if _, err := client.Delete(ctx, &consulpb.DeleteRequest{Id: two.Resource.Id, Version: two.Resource.Version}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	del := recv(t, watch)
	if del.GetDelete().GetResource().GetId().GetUid() != two.Resource.Id.Uid {
		t.Fatalf("watch event after Delete = %v, want the delete of %q", del, "two")
	}
	if len(del.GetDelete().ProtoReflect().GetUnknown()) == 0 {
		t.Errorf("Delete event has no unknown field: did Loom stop sending the deletion's version? %v", del)
	}
	list, err := client.List(ctx, &consulpb.ListRequest{Type: consulBarType, Tenancy: consulDefault})
	if err != nil || len(list.Resources) != 1 || !proto.Equal(list.Resources[0], wrote.Resource) {
		t.Errorf("List: %v %v, want just %q", list, err, "one")
	}
}

// A resource built with Loom's types decodes into Consul's and back without
// loss; a Loom tombstone in an Any is a Consul Tombstone to Consul's
// registry.
func TestMessagesCrossOver(t *testing.T) {
	owner := &pbresource.ID{
		Type:    &pbresource.Type{Group: "foo", GroupVersion: "v1", Kind: "Bar"},
		Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		Name:    "owner",
		Uid:     "01HZXY",
	}
	data, err := anypb.New(&pbresource.Tombstone{Owner: owner})
	if err != nil {
		t.Fatal(err)
	}
	loom := &pbresource.Resource{
		Id:         &pbresource.ID{Type: &pbresource.Type{Group: "internal", GroupVersion: "v1", Kind: "Tombstone"}, Name: "t", Uid: "u"},
		Owner:      owner,
		Version:    "7",
		Generation: "01HZXZ",
		Metadata:   map[string]string{"k": "v"},
		Status: map[string]*pbresource.Status{"c": {
			ObservedGeneration: "01HZXZ",
			Conditions: []*pbresource.Condition{{
				Type: "Accepted", State: pbresource.Condition_STATE_TRUE, Reason: "OK", Message: "fine",
				Resource: &pbresource.Reference{Type: owner.Type, Tenancy: owner.Tenancy, Name: "owner", Section: "s"},
			}},
			UpdatedAt: timestamppb.New(time.Unix(1700000000, 5)),
		}},
		Data: data,
	}
	b, err := proto.Marshal(loom)
	if err != nil {
		t.Fatal(err)
	}
	var consul consulpb.Resource
	if err := proto.Unmarshal(b, &consul); err != nil {
		t.Fatal(err)
	}
	if len(consul.ProtoReflect().GetUnknown()) != 0 {
		t.Errorf("Consul's Resource has unknown fields: %x", consul.ProtoReflect().GetUnknown())
	}
	cond := consul.Status["c"].GetConditions()[0]
	if consul.Owner.GetUid() != "01HZXY" || consul.Metadata["k"] != "v" || cond.GetState() != consulpb.Condition_STATE_TRUE ||
		cond.GetResource().GetSection() != "s" || !consul.Status["c"].GetUpdatedAt().AsTime().Equal(time.Unix(1700000000, 5)) {
		t.Errorf("Consul decoded %v from %v", &consul, loom)
	}
	// Consul's registry resolves the Any to Consul's Tombstone.
	m, err := consul.Data.UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	if ts, ok := m.(*consulpb.Tombstone); !ok || ts.GetOwner().GetName() != "owner" {
		t.Errorf("Consul's registry decoded the data as %T %v, want Consul's Tombstone of %q", m, m, "owner")
	}

	b, err = proto.Marshal(&consul)
	if err != nil {
		t.Fatal(err)
	}
	var back pbresource.Resource
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&back, loom) {
		t.Errorf("Loom -> Consul -> Loom gave %v, want %v", &back, loom)
	}
}

// A type generated against Consul's pbresource (here Consul's
// ComputedTrafficPermissions, with a repeated hashicorp.consul.resource.Reference)
// is the data of a Loom resource type: its hooks decode it, Loom's client
// writes it, Consul's client reads it.
func TestConsulGeneratedDataType(t *testing.T) {
	ctpType := &pbresource.Type{Group: "auth", GroupVersion: "v2beta1", Kind: "ComputedTrafficPermissions"}
	validate := func(res *resource.Decoded[*pbauth.ComputedTrafficPermissions]) error {
		for _, ref := range res.Data.GetBoundReferences() {
			if ref.GetName() == "" {
				return resource.ErrInvalidField{Name: "bound_references", Wrapped: resource.ErrMissing}
			}
		}
		return nil
	}
	conn := loomServer(t, func(r resource.Registry) error {
		return resource.Register(r, resource.Registration[*pbauth.ComputedTrafficPermissions]{
			Type:     ctpType,
			Scope:    resource.ScopeNamespace,
			Validate: validate,
		})
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	ctp := &pbauth.ComputedTrafficPermissions{
		IsDefault: true,
		BoundReferences: []*consulpb.Reference{{
			Type:    &consulpb.Type{Group: "auth", GroupVersion: "v2beta1", Kind: "TrafficPermissions"},
			Tenancy: consulDefault,
			Name:    "tp",
		}},
	}
	data, err := anypb.New(ctp)
	if err != nil {
		t.Fatal(err)
	}
	id := &pbresource.ID{Type: ctpType, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: "web"}
	loomClient := pbresource.NewResourceServiceClient(conn)
	if _, err := loomClient.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}}); err != nil {
		t.Fatalf("Write: %v", err)
	}

	bad := proto.Clone(ctp).(*pbauth.ComputedTrafficPermissions)
	bad.BoundReferences[0].Name = ""
	badData, err := anypb.New(bad)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loomClient.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: badData}}); err == nil || !strings.Contains(err.Error(), "bound_references") {
		t.Errorf("Write of a reference without a name: %v, want the Validate hook's error", err)
	}

	read, err := consulpb.NewResourceServiceClient(conn).Read(ctx, &consulpb.ReadRequest{Id: &consulpb.ID{
		Type: &consulpb.Type{Group: "auth", GroupVersion: "v2beta1", Kind: "ComputedTrafficPermissions"}, Tenancy: consulDefault, Name: "web",
	}})
	if err != nil {
		t.Fatalf("Read with Consul's client: %v", err)
	}
	var got pbauth.ComputedTrafficPermissions
	if err := read.Resource.Data.UnmarshalTo(&got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, ctp) {
		t.Errorf("read %v, want %v", &got, ctp)
	}
}

// Consul's client does not ask for batches of events, so a Loom server
// sends it every event of a large snapshot and a burst as a message of its
// own, with a case Consul's client knows (a batch would reach it as an
// event with no case set).
func TestConsulClientGetsNoBatches(t *testing.T) {
	client := consulpb.NewResourceServiceClient(loomServer(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const n = 500
	for i := range n {
		if _, err := client.Write(ctx, &consulpb.WriteRequest{Resource: consulBar(t, fmt.Sprint("bar-", i), "B")}); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	watch, err := client.WatchList(ctx, &consulpb.WatchListRequest{
		Type:    consulBarType,
		Tenancy: &consulpb.Tenancy{Partition: "*", Namespace: "*"},
	})
	if err != nil {
		t.Fatalf("WatchList: %v", err)
	}
	for i := range n {
		if ev := recv(t, watch); ev.GetUpsert() == nil {
			t.Fatalf("snapshot event %d = %v, want an upsert", i, ev)
		}
	}
	if ev := recv(t, watch); ev.GetEndOfSnapshot() == nil {
		t.Fatalf("event after the snapshot = %v, want EndOfSnapshot", ev)
	}
	for i := range n {
		if _, err := client.Write(ctx, &consulpb.WriteRequest{Resource: consulBar(t, fmt.Sprint("more-", i), "M")}); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	for i := range n {
		if ev := recv(t, watch); ev.GetUpsert() == nil {
			t.Fatalf("change %d = %v, want an upsert", i, ev)
		}
	}
}
