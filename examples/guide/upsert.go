package guide

import (
	"context"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/upsert"
	"google.golang.org/protobuf/types/known/anypb"
)

// setBaz sets a Bar's baz, creating the Bar if needed, and keeps what
// others put on it (the reconciler's finalizer, statuses).
func setBaz(ctx context.Context, client pbresource.ResourceServiceClient, name, baz string) (upsert.Result, error) {
	id := &pbresource.ID{Type: BarType, Name: name}
	_, result, err := upsert.CreateOrUpdate(ctx, client, id, func(res *pbresource.Resource) error {
		data, err := anypb.New(&pbfoov1.Bar{Baz: baz})
		res.Data = data
		return err
	})
	return result, err
}
