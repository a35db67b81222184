package server

import (
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// cloneResources copies the resources of a List or ListByOwner response for
// the in-process client (see NewInProcessClient). clone_test.go checks that
// the responses it copies keep the shape it assumes.
func cloneResources(rs []*pbresource.Resource) []*pbresource.Resource {
	if rs == nil {
		return nil
	}
	out := make([]*pbresource.Resource, len(rs))
	for i, r := range rs {
		out[i] = resource.Clone(r)
	}
	return out
}
