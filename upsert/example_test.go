package upsert_test

import (
	"context"
	"fmt"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/storage/inmem"
	"github.com/loomrt/loom/upsert"
	"google.golang.org/protobuf/types/known/anypb"
)

// Set a Bar's data, creating the Bar if it is missing and keeping the
// finalizers, metadata and statuses others gave it.
func ExampleCreateOrUpdate() {
	registry := resource.NewRegistry()
	foo.RegisterTypes(registry)
	// In a reconciler, rt.Client.
	client := server.NewInProcessClient(server.New(server.Config{Backend: inmem.New(), Registry: registry}))

	setBaz := func(baz string) upsert.Result {
		id := &pbresource.ID{Type: foo.BarV1Type, Name: "example"}
		_, result, err := upsert.CreateOrUpdate(context.Background(), client, id, func(res *pbresource.Resource) error {
			data, err := anypb.New(&pbfoov1.Bar{Baz: baz})
			res.Data = data
			return err
		})
		if err != nil {
			panic(err)
		}
		return result
	}
	fmt.Println(setBaz("hello"))
	fmt.Println(setBaz("world"))
	fmt.Println(setBaz("world"))
	// Output:
	// created
	// updated
	// unchanged
}
