package foo

import (
	"errors"
	"strings"
	"testing"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
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
			if got, want := reg.Proto.ProtoReflect().Descriptor().FullName(), tc.proto.ProtoReflect().Descriptor().FullName(); got != want {
				t.Errorf("proto = %s, want %s", got, want)
			}
			if hooked := reg.Mutate != nil && reg.Validate != nil; hooked != tc.hooked {
				t.Errorf("has Mutate and Validate = %v, want %v", hooked, tc.hooked)
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
	r := newRegistry(t)
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
		reg, _ := r.Resolve(v.typ)
		for _, tc := range barCases {
			t.Run(resource.TypeString(v.typ)+"/"+tc.name, func(t *testing.T) {
				res := &pbresource.Resource{
					Id:   &pbresource.ID{Type: v.typ, Name: "b1"},
					Data: mustAny(t, v.encode(tc.baz)),
				}
				if err := reg.Mutate(res); err != nil {
					t.Fatalf("Mutate: %v", err)
				}
				got, err := v.baz(res.Data)
				if err != nil {
					t.Fatalf("decoding mutated data: %v", err)
				}
				if got != tc.wantBaz {
					t.Errorf("baz after Mutate = %q, want %q", got, tc.wantBaz)
				}

				err = reg.Validate(res)
				if tc.wantField == "" {
					if err != nil {
						t.Errorf("Validate: %v", err)
					}
					return
				}
				var fieldErr resource.ErrInvalidField
				if !errors.As(err, &fieldErr) {
					t.Fatalf("Validate error = %v, want an ErrInvalidField", err)
				}
				if fieldErr.Name != tc.wantField {
					t.Errorf("Validate named field %q, want %q", fieldErr.Name, tc.wantField)
				}
			})
		}
	}
}

func TestBarMutateLeavesCleanDataAlone(t *testing.T) {
	r := newRegistry(t)
	reg, _ := r.Resolve(BarV1Type)
	data := mustAny(t, &pbfoov1.Bar{Baz: "already lower"})
	res := &pbresource.Resource{Data: data}
	if err := reg.Mutate(res); err != nil {
		t.Fatal(err)
	}
	if res.Data != data {
		t.Error("Mutate replaced Data although nothing needed changing")
	}
}

func TestBarHooksRejectWrongData(t *testing.T) {
	r := newRegistry(t)
	wrong := []struct {
		name string
		data *anypb.Any
	}{
		{"nil data", nil},
		{"another message", mustAny(t, &pbfoov1.Zip{Zap: "z"})},
		{"garbage bytes", &anypb.Any{TypeUrl: "type.googleapis.com/loom.example.foo.v1.Bar", Value: []byte{0xff, 0xff}}},
	}
	for _, typ := range []*pbresource.Type{BarV1Type, BarV2Type} {
		reg, _ := r.Resolve(typ)
		for _, tc := range wrong {
			t.Run(resource.TypeString(typ)+"/"+tc.name, func(t *testing.T) {
				hooks := map[string]func(*pbresource.Resource) error{"Mutate": reg.Mutate, "Validate": reg.Validate}
				for name, hook := range hooks {
					err := hook(&pbresource.Resource{Data: tc.data})
					var parseErr resource.ErrDataParse
					if !errors.As(err, &parseErr) {
						t.Errorf("%s error = %v, want an ErrDataParse", name, err)
					}
				}
			})
		}
	}
}
