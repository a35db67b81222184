package server

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/benchutil"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

// BenchmarkW7History is W7's writes through the in-process client (see
// BenchmarkW7) on an in-memory store with history (storage.Historian) on,
// next to one with it off, in the same run (benchutil.OnOff): issue 23's
// budget is cpu-ratio <= 1.25. Every update changes the data, so the
// server gives it a new Generation and the store records it.
func BenchmarkW7History(b *testing.B) {
	ctx := context.Background()
	data := [2]*pbresource.Resource{}
	for i := range data {
		data[i] = &pbresource.Resource{Data: mustAny(b, &pbfoov1.Zip{Zap: "some widget data, version " + strconv.Itoa(i)})}
	}
	client := func(opt inmem.Option) pbresource.ResourceServiceClient {
		reg := resource.NewRegistry()
		resource.MustRegister(reg, resource.Registration[*pbfoov1.Zip]{Type: widgetType, Scope: resource.ScopeNamespace})
		return NewInProcessClient(New(Config{Backend: inmem.New(opt), Registry: reg}))
	}

	b.Run("op=write-create", func(b *testing.B) {
		names := make([]string, b.N)
		for i := range names {
			names[i] = widgetName(i)
		}
		create := func(c pbresource.ResourceServiceClient) func(int) {
			return func(i int) {
				_, err := c.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: widgetID(names[i]), Data: data[0].Data}})
				require.NoError(b, err)
			}
		}
		benchutil.OnOff(b, 256, nil, create(client(inmem.WithHistory(storage.HistoryLimits{}))), create(client(inmem.WithoutHistory())))
	})

	b.Run("op=write-update", func(b *testing.B) {
		update := func(c pbresource.ResourceServiceClient) func(int) {
			out, err := c.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: widgetID("w"), Data: data[0].Data}})
			require.NoError(b, err)
			id := out.Resource.Id
			return func(i int) {
				_, err := c.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data[(i+1)%2].Data}})
				require.NoError(b, err)
			}
		}
		benchutil.OnOff(b, 256, nil, update(client(inmem.WithHistory(storage.HistoryLimits{}))), update(client(inmem.WithoutHistory())))
	})
}
