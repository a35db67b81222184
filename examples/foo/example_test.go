package foo_test

import (
	"context"
	"fmt"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/builtin"
	"github.com/loomrt/loom/storage/inmem"
)

// Register the example types on a ResourceService and write a foo.v1.Bar
// through the in-process client: the Mutate hook lower-cases baz, and the
// Validate hook turns an empty baz away.
func Example() {
	ctx := context.Background()

	registry := resource.NewRegistry()
	if err := foo.RegisterTypes(registry); err != nil {
		panic(err)
	}
	// The server comes with its built-in controllers on a Manager (the
	// reaper, which deletes what a deleted owner owned): run it beside the
	// server.
	srv, mgr, err := builtin.New(server.Config{Backend: inmem.New(), Registry: registry}, nil)
	if err != nil {
		panic(err)
	}
	mgr.SetLeader(true) // the only server: it leads
	mgrCtx, stopMgr := context.WithCancel(ctx)
	mgrDone := make(chan error, 1)
	go func() { mgrDone <- mgr.Run(mgrCtx) }()
	defer func() { stopMgr(); <-mgrDone }()
	client := server.NewInProcessClient(srv)

	write := func(name, baz string) (*pbresource.Resource, error) {
		data, err := anypb.New(&pbfoov1.Bar{Baz: baz})
		if err != nil {
			return nil, err
		}
		rsp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
			// Partition and namespace are left out: they default to "default".
			Id:   &pbresource.ID{Type: foo.BarV1Type, Name: name},
			Data: data,
		}})
		return rsp.GetResource(), err
	}

	res, err := write("greeting", "Hello World")
	if err != nil {
		fmt.Println("write failed:", err)
		return
	}
	var bar pbfoov1.Bar
	if err := res.Data.UnmarshalTo(&bar); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("stored %s with baz %q\n", resource.ReferenceString(res.Id), bar.Baz)

	_, err = write("empty", "")
	st := status.Convert(err)
	fmt.Printf("empty baz: %s: %s\n", st.Code(), st.Message())

	// Output:
	// stored foo.v1.Bar/default.default/greeting with baz "hello world"
	// empty baz: InvalidArgument: invalid "baz" field: field is required
}
