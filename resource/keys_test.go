package resource_test

import (
	"testing"

	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

func TestNameKeyOfLeavesOutTypeAndUid(t *testing.T) {
	ten := &pbresource.Tenancy{Partition: "p", Namespace: "ns"}
	a := &pbresource.ID{Type: &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"}, Tenancy: ten, Name: "n", Uid: "1"}
	b := &pbresource.ID{Type: &pbresource.Type{Group: "g", GroupVersion: "v2", Kind: "K"}, Tenancy: ten, Name: "n", Uid: "2"}
	if resource.NameKeyOf(a) != resource.NameKeyOf(b) {
		t.Fatalf("NameKeyOf(%v) = %v, NameKeyOf(%v) = %v; want equal", a, resource.NameKeyOf(a), b, resource.NameKeyOf(b))
	}
	if got := resource.NameKeyOf(a).String(); got != "p/ns/n" {
		t.Fatalf("String() = %q, want p/ns/n", got)
	}
}

func TestUnversionedTypeFromLeavesOutGroupVersion(t *testing.T) {
	v1 := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"}
	v2 := &pbresource.Type{Group: "g", GroupVersion: "v2", Kind: "K"}
	if resource.UnversionedTypeFrom(v1) != resource.UnversionedTypeFrom(v2) {
		t.Fatalf("UnversionedTypeFrom differs between GroupVersions: %v, %v", resource.UnversionedTypeFrom(v1), resource.UnversionedTypeFrom(v2))
	}
	if got, want := resource.UnversionedTypeFrom(v1).String(), resource.UnversionedTypeString(v1); got != want || got != "g.K" {
		t.Fatalf("String() = %q, UnversionedTypeString = %q; want g.K", got, want)
	}
}
