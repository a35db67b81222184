package robustness

import (
	"fmt"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// exampleType is the example type a run writes (see Config.Type): its type,
// the tenancy of its resources, and how Input.Baz is carried in its data.
type exampleType struct {
	typ     *pbresource.Type
	tenancy *pbresource.Tenancy
	data    func(baz string) (*anypb.Any, error)
}

// exampleFor returns the exampleType of t: foo.v1.Bar when t is nil, or foo.v1.Zip.
func exampleFor(t *pbresource.Type) (exampleType, error) {
	switch {
	case t == nil || resource.EqualType(t, foo.BarV1Type):
		return exampleType{
			typ:     copyType(foo.BarV1Type),
			tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
			data:    func(baz string) (*anypb.Any, error) { return anypb.New(&pbfoov1.Bar{Baz: baz}) },
		}, nil
	case resource.EqualType(t, foo.ZipType):
		return exampleType{
			typ:     copyType(foo.ZipType),
			tenancy: &pbresource.Tenancy{Partition: "default"},
			data:    func(baz string) (*anypb.Any, error) { return anypb.New(&pbfoov1.Zip{Zap: baz}) },
		}, nil
	}
	return exampleType{}, fmt.Errorf("the workload writes foo.v1.Bar or foo.v1.Zip, not %s", resource.TypeString(t))
}

func copyType(t *pbresource.Type) *pbresource.Type {
	return &pbresource.Type{Group: t.Group, GroupVersion: t.GroupVersion, Kind: t.Kind}
}

// id returns the ID of the resource named name (with uid, if any), a new
// one each time: the in-process service may normalize what it is sent.
func (k exampleType) id(name, uid string) *pbresource.ID {
	return &pbresource.ID{Type: copyType(k.typ), Tenancy: k.ten(), Name: name, Uid: uid}
}

// ten returns a new copy of the tenancy of the run's resources.
func (k exampleType) ten() *pbresource.Tenancy {
	return &pbresource.Tenancy{Partition: k.tenancy.Partition, Namespace: k.tenancy.Namespace}
}
