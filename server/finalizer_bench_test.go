package server

import (
	"context"
	"strconv"
	"strings"
	"testing"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/testkit/benchutil"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// BenchmarkDeleteFinalizers proves that the service's work on finalizers is
// linear in their number (issue 8, item 2). Each iteration stores a widget
// with n finalizers (untimed) and then, timed, takes it through the
// deferred deletion a controller would drive:
//
//   - Delete: marks it (the stored finalizers are looked at);
//   - a Write removing one finalizer: accepted only if it adds none, which
//     compares the n-1 remaining names with the n stored ones;
//   - a Write removing the rest: the service deletes the resource.
//
// The server's methods are called directly (no client copies), so the
// figure is the service's own CPU plus the in-memory backend's copies. n
// goes far past MaxFinalizers: the benchmark lifts the finalizer and size
// limits on its server (the limits are plain fields of Server, set by New)
// because it measures the algorithm, not the policy. cpu-ns/finalizer, the
// process CPU of the three requests divided by n, stays flat from 1k to
// 100k when the work is linear (it grew 100-fold per decade before the
// fix).
func BenchmarkDeleteFinalizers(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) { benchDeleteFinalizers(b, n) })
	}
}

func benchDeleteFinalizers(b *testing.B, n int) {
	env, _, stop := benchEnv(b, "inproc")
	defer stop()
	liftLimits(env.server)
	ctx := context.Background()
	names := make([]string, n)
	for i := range names {
		names[i] = "example.com/finalizer-" + strconv.Itoa(i)
	}
	all := strings.Join(names, " ")
	allButFirst := strings.Join(names[1:], " ")

	var totals benchutil.Totals
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		name := widgetName(i)
		res := widgetWith(b, name, map[string]string{resource.FinalizerKey: all})
		created, err := env.server.Write(ctx, &pbresource.WriteRequest{Resource: res})
		if err != nil {
			b.Fatal(err)
		}
		id := created.Resource.Id
		removeOne := widgetWith(b, name, map[string]string{resource.FinalizerKey: allButFirst})
		removeAll := widgetWith(b, name, map[string]string{})
		b.StartTimer()

		span := benchutil.Start()
		if _, err := env.server.Delete(ctx, &pbresource.DeleteRequest{Id: cloneID(id)}); err != nil {
			b.Fatal(err)
		}
		marked, err := env.server.Read(ctx, &pbresource.ReadRequest{Id: cloneID(id)})
		if err != nil {
			b.Fatal(err)
		}
		ts := marked.Resource.Metadata[resource.DeletionTimestampKey]
		removeOne.Metadata[resource.DeletionTimestampKey] = ts
		removeAll.Metadata[resource.DeletionTimestampKey] = ts
		if _, err := env.server.Write(ctx, &pbresource.WriteRequest{Resource: removeOne}); err != nil {
			b.Fatal(err)
		}
		if _, err := env.server.Write(ctx, &pbresource.WriteRequest{Resource: removeAll}); err != nil {
			b.Fatal(err)
		}
		totals.Add(span.Stop(), n)

		b.StopTimer()
		if _, err := env.server.Read(ctx, &pbresource.ReadRequest{Id: cloneID(id)}); err == nil {
			b.Fatal("the resource is still there after its last finalizer was removed")
		}
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(float64(totals.CPU.Nanoseconds())/float64(totals.Items), "cpu-ns/finalizer")
	b.ReportMetric(float64(totals.CPU.Microseconds())/float64(b.N)/1e3, "cpu-ms/op")
}

func widgetWith(b *testing.B, name string, meta map[string]string) *pbresource.Resource {
	return &pbresource.Resource{Id: widgetID(name), Metadata: meta, Data: mustAny(b, widgetData)}
}

func cloneID(id *pbresource.ID) *pbresource.ID {
	return &pbresource.ID{Uid: id.Uid, Name: id.Name, Type: id.Type, Tenancy: id.Tenancy}
}

// widgetData is the data of the finalizer benchmark's widgets.
var widgetData = &pbfoov1.Zip{Zap: "a widget waiting for its finalizers"}

// liftLimits lets s store resources of any size with any number of
// finalizers.
func liftLimits(s *Server) {
	s.limits.resourceBytes = 1 << 30
	s.limits.finalizers = 1 << 30
	s.limits.metadataValue = 1 << 30
}
