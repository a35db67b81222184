package foo

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

func newRegistry(t *testing.T) *resource.TypeRegistry {
	t.Helper()
	r := resource.NewRegistry()
	if err := RegisterTypes(r); err != nil {
		t.Fatal(err)
	}
	return r
}

func mustAny(t *testing.T, m proto.Message) *anypb.Any {
	t.Helper()
	a, err := anypb.New(m)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRegisterTypes(t *testing.T) {
	r := newRegistry(t)
	cases := []struct {
		typ    *pbresource.Type
		scope  resource.Scope
		proto  proto.Message
		hooked bool
	}{
		{BarV1Type, resource.ScopeNamespace, &pbfoov1.Bar{}, true},
		{BarV2Type, resource.ScopeNamespace, &pbfoov2.Bar{}, true},
		{ZipType, resource.ScopePartition, &pbfoov1.Zip{}, false},
		{QuxType, resource.ScopeCluster, &pbfoov1.Qux{}, false},
	}
	if got := len(r.Types()); got != len(cases) {
		t.Fatalf("registered %d types, want %d", got, len(cases))
	}
	for _, tc := range cases {
		t.Run(resource.TypeString(tc.typ), func(t *testing.T) {
			reg, ok := r.Resolve(tc.typ)
			if !ok {
				t.Fatal("not registered")
			}
			if reg.Scope != tc.scope {
				t.Errorf("scope = %v, want %v", reg.Scope, tc.scope)
			}
			if got, want := reg.MessageName(), tc.proto.ProtoReflect().Descriptor().FullName(); got != want {
				t.Errorf("message = %s, want %s", got, want)
			}
			if hooked := reg.HasMutate(); hooked != tc.hooked {
				t.Errorf("has Mutate = %v, want %v", hooked, tc.hooked)
			}
		})
	}
}

func TestRegisterTypesTwiceFails(t *testing.T) {
	r := newRegistry(t)
	err := RegisterTypes(r)
	for _, typ := range []*pbresource.Type{BarV1Type, BarV2Type, ZipType, QuxType} {
		if want := "registering type " + resource.TypeString(typ) + ": already registered"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("registering the example types twice: error %v does not say %q", err, want)
		}
	}
}

// barCase runs the same table against both versions of Bar.
type barCase struct {
	name      string
	baz       string
	wantBaz   string // after Mutate
	wantField string // non-empty: Validate must fail naming this field
}

var barCases = []barCase{
	{name: "lower case is kept", baz: "hello", wantBaz: "hello"},
	{name: "mixed case is lowered", baz: "Hello World", wantBaz: "hello world"},
	{name: "upper case is lowered", baz: "ABC-123", wantBaz: "abc-123"},
	{name: "non-ASCII is lowered", baz: "ÉTÉ", wantBaz: "été"},
	{name: "empty is rejected", baz: "", wantBaz: "", wantField: "baz"},
}

func TestBarHooks(t *testing.T) {
	client := resourcetest.RunResourceService(t, RegisterTypes)
	versions := []struct {
		typ    *pbresource.Type
		encode func(baz string) proto.Message
		baz    func(*anypb.Any) (string, error)
	}{
		{
			typ:    BarV1Type,
			encode: func(baz string) proto.Message { return &pbfoov1.Bar{Baz: baz, Qux: &pbresource.ID{Name: "kept"}} },
			baz: func(a *anypb.Any) (string, error) {
				var b pbfoov1.Bar
				if err := a.UnmarshalTo(&b); err != nil {
					return "", err
				}
				if b.GetQux().GetName() != "kept" {
					return "", errors.New("Mutate lost the qux field")
				}
				return b.Baz, nil
			},
		},
		{
			typ:    BarV2Type,
			encode: func(baz string) proto.Message { return &pbfoov2.Bar{Baz: baz} },
			baz: func(a *anypb.Any) (string, error) {
				var b pbfoov2.Bar
				err := a.UnmarshalTo(&b)
				return b.Baz, err
			},
		},
	}
	for _, v := range versions {
		for _, tc := range barCases {
			t.Run(resource.TypeString(v.typ)+"/"+tc.name, func(t *testing.T) {
				res := &pbresource.Resource{
					Id:   &pbresource.ID{Type: v.typ, Name: "b1"},
					Data: mustAny(t, v.encode(tc.baz)),
				}
				out, err := client.MutateAndValidate(context.Background(), &pbresource.MutateAndValidateRequest{Resource: res})
				if tc.wantField != "" {
					if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.wantField) {
						t.Fatalf("MutateAndValidate error = %v, want InvalidArgument naming %q", err, tc.wantField)
					}
					return
				}
				if err != nil {
					t.Fatalf("MutateAndValidate: %v", err)
				}
				got, err := v.baz(out.Resource.Data)
				if err != nil {
					t.Fatalf("decoding mutated data: %v", err)
				}
				if got != tc.wantBaz {
					t.Errorf("baz after Mutate = %q, want %q", got, tc.wantBaz)
				}
			})
		}
	}
}

func TestBarMutateLeavesCleanDataAlone(t *testing.T) {
	client := resourcetest.RunResourceService(t, RegisterTypes)
	data := mustAny(t, &pbfoov1.Bar{Baz: "already lower"})
	res := &pbresource.Resource{Id: &pbresource.ID{Type: BarV1Type, Name: "b1"}, Data: data}
	out, err := client.MutateAndValidate(context.Background(), &pbresource.MutateAndValidateRequest{Resource: res})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Resource.Data.Value, data.Value) {
		t.Error("Mutate changed the encoding of data that needed no change")
	}
	first, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: res})
	if err != nil {
		t.Fatal(err)
	}
	again, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: res})
	if err != nil {
		t.Fatal(err)
	}
	if again.Resource.Version != first.Resource.Version {
		t.Errorf("writing the same Bar again made version %s from %s, want a no-op", again.Resource.Version, first.Resource.Version)
	}
}

func TestBarHooksRejectWrongData(t *testing.T) {
	client := resourcetest.RunResourceService(t, RegisterTypes)
	wrong := []struct {
		name string
		data *anypb.Any
	}{
		{"nil data", nil},
		{"another message", mustAny(t, &pbfoov1.Zip{Zap: "z"})},
		{"garbage bytes", &anypb.Any{TypeUrl: "type.googleapis.com/loom.example.foo.v1.Bar", Value: []byte{0xff, 0xff}}},
	}
	for _, typ := range []*pbresource.Type{BarV1Type, BarV2Type} {
		for _, tc := range wrong {
			t.Run(resource.TypeString(typ)+"/"+tc.name, func(t *testing.T) {
				res := &pbresource.Resource{Id: &pbresource.ID{Type: typ, Name: "b1"}, Data: tc.data}
				_, err := client.MutateAndValidate(context.Background(), &pbresource.MutateAndValidateRequest{Resource: res})
				if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "data") {
					t.Errorf("error = %v, want InvalidArgument naming data", err)
				}
			})
		}
	}
}
