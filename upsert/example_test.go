package upsert_test

import (
	"context"
	"errors"
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

// Give a Zip a Bar it owns. After the Zip is deleted and created again,
// the Bar still belongs to the earlier Zip (until the reaper removes it):
// it is not the new Zip's, and ReplaceStale replaces it.
func ExampleCreateOrUpdateOwned() {
	registry := resource.NewRegistry()
	foo.RegisterTypes(registry)
	client := server.NewInProcessClient(server.New(server.Config{Backend: inmem.New(), Registry: registry}))
	ctx := context.Background()

	writeZip := func() *pbresource.Resource {
		data, _ := anypb.New(&pbfoov1.Zip{Zap: "z"})
		rsp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: &pbresource.ID{Type: foo.ZipType, Name: "z"}, Data: data}})
		if err != nil {
			panic(err)
		}
		return rsp.Resource
	}
	setBar := func(zip *pbresource.Resource, opts ...upsert.Option) error {
		id := &pbresource.ID{Type: foo.BarV1Type, Name: "z"}
		_, result, err := upsert.CreateOrUpdateOwned(ctx, client, zip.Id, id, func(res *pbresource.Resource) error {
			data, err := anypb.New(&pbfoov1.Bar{Baz: "for z"})
			res.Data = data
			return err
		}, opts...)
		if err == nil {
			fmt.Println(result)
		}
		return err
	}

	zip := writeZip()
	_ = setBar(zip)
	if _, err := client.Delete(ctx, &pbresource.DeleteRequest{Id: zip.Id}); err != nil {
		panic(err)
	}
	zip = writeZip()

	var owned *upsert.AlreadyOwnedError
	if err := setBar(zip); errors.As(err, &owned) {
		fmt.Println("owned by an earlier lifetime:", owned.Stale())
	}
	_ = setBar(zip, upsert.ReplaceStale())
	// Output:
	// created
	// owned by an earlier lifetime: true
	// created
}
