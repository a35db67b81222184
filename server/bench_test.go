package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/internal/pbdecode"
	"github.com/loomrt/loom/internal/testkit/benchutil"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// widgetType is the benchmarks' resource type: namespace-scoped, no hooks,
// a small message as data.
var widgetType = &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"}

func widgetID(name string) *pbresource.ID {
	return &pbresource.ID{
		Type:    widgetType,
		Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		Name:    name,
	}
}

func widgetName(i int) string { return "widget-" + strconv.Itoa(i) }

// registerWidget registers widgetType with env's registry.
func registerWidget(env *testEnv) {
	resource.MustRegister(env.registry, resource.Registration[*pbfoov1.Zip]{Type: widgetType, Scope: resource.ScopeNamespace})
}

// benchEnv is a server with the widget type registered, and a client to it
// over the named transport: "inproc" (NewInProcessClient), "grpc" (a real
// grpc.Server on a loopback listener and a grpc.NewClient connection, in
// plaintext) or "grpc-tls-token" (the same with TLS and an ACL token, see
// benchTLSTokenEnv). stop ends the gRPC server and connection.
func benchEnv(b *testing.B, transport string) (env *testEnv, client pbresource.ResourceServiceClient, stop func()) {
	b.Helper()
	if transport == "grpc-tls-token" {
		return benchTLSTokenEnv(b)
	}
	env = newEnv(b)
	registerWidget(env)
	if transport == "grpc" {
		client, stop = serveLoopback(b, env)
		return env, client, stop
	}
	return env, env.client, func() {}
}

// BenchmarkW7 is workload W7 of BENCHMARKS.md: the service's operations
// through the in-process client and over loopback gRPC (in plaintext, and
// with TLS and an ACL token: issue 10's budget is the latter at no more
// than 1.25 times the former's CPU per operation), with 1 and 4 client
// goroutines (sharing one client, and for gRPC one connection). Besides
// wall time it reports ops/s and the process CPU per operation, which counts
// the client, the server and the runtime on every core; allocs/op counts
// the allocations of the whole process too.
//
// Each client goroutine has a resource of its own to update, write the
// status of and read, so the writes do not contend for one resource. An
// update alternates between two data payloads, so every Write changes the
// resource (an unchanged Write is a no-op and would measure less).
func BenchmarkW7(b *testing.B) {
	for _, transport := range []string{"inproc", "grpc", "grpc-tls-token"} {
		for _, op := range []string{"write-create", "write-update", "writestatus", "read", "list-10k"} {
			for _, clients := range []int{1, 4} {
				name := fmt.Sprintf("%s/%s/clients=%d", transport, op, clients)
				b.Run(name, func(b *testing.B) { benchW7(b, transport, op, clients) })
			}
		}
	}
}

func benchW7(b *testing.B, transport, op string, clients int) {
	_, client, stop := benchEnv(b, transport)
	defer stop()
	ctx := context.Background()
	data := [2]*pbresource.Resource{} // only Data is used
	for i := range data {
		data[i] = &pbresource.Resource{Data: mustAny(b, &pbfoov1.Zip{Zap: "some widget data, version " + strconv.Itoa(i)})}
	}

	// Client c owns widget-c; list-10k stores 10,000 widgets.
	seed := clients
	if op == "list-10k" {
		seed = 10_000
	}
	owned := make([]*pbresource.Resource, seed)
	for i := range seed {
		out, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: widgetID(widgetName(i)), Data: data[0].Data}})
		if err != nil {
			b.Fatal(err)
		}
		owned[i] = out.Resource
	}
	// Names of the widgets write-create makes, built before the clock runs.
	var names []string
	if op == "write-create" {
		names = make([]string, b.N)
		for i := range names {
			names[i] = widgetName(seed + i)
		}
	}
	var created atomic.Int64

	// do runs the i-th operation of client c.
	do := func(c, i int) error {
		switch op {
		case "write-create":
			n := created.Add(1) - 1
			_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: widgetID(names[n]), Data: data[0].Data}})
			return err
		case "write-update":
			_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
				Id: owned[c].Id, Data: data[(i+1)%2].Data,
			}})
			return err
		case "writestatus":
			_, err := client.WriteStatus(ctx, &pbresource.WriteStatusRequest{
				Id: owned[c].Id, Key: "bench.widget", Status: simpleStatus(owned[c].Generation),
			})
			return err
		case "read":
			_, err := client.Read(ctx, &pbresource.ReadRequest{Id: owned[c].Id})
			return err
		case "list-10k":
			out, err := client.List(ctx, &pbresource.ListRequest{Type: widgetType, Tenancy: owned[0].Id.Tenancy})
			if err == nil && len(out.Resources) != seed {
				err = fmt.Errorf("listed %d resources, want %d", len(out.Resources), seed)
			}
			return err
		}
		panic("unknown op " + op)
	}

	b.ReportAllocs()
	b.ResetTimer()
	span := benchutil.Start()
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		// Client c does every clients-th operation.
		wg.Go(func() {
			for i := c; i < b.N; i += clients {
				if err := do(c, i/clients); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	r := span.Stop()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(r.CPU.Nanoseconds())/1e3/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(b.N)/r.Wall.Seconds(), "ops/s")
}

// BenchmarkW8 is workload W8 of BENCHMARKS.md at the ResourceService level:
// 100 WatchList streams on one type, 10,000 writes (creates) from one
// goroutine; an iteration ends when every stream has received every event.
// The streams use the named transport (for gRPC: 100 streams on one
// connection). Over gRPC, the client is the generated one; it reads the
// stream as Consul's clients do (grpc), asks for batches of events
// (grpc-batched), or also decodes the events with the codec of a Loom
// Manager's remote cache, internal/pbdecode (grpc-batched-pbdecode); the writes always go through the in-process client, so the
// figure is the cost of the fan-out and not that of 10,000 write RPCs
// (BenchmarkW7 measures those).
//
// It reports the events delivered per second in total (100 × 10,000 over
// the time from the first write until the last stream has its last event),
// the process CPU and allocations per delivered event, and lag-p99-ms: the 99th percentile,
// over a sample of one event in ten per stream, of the time from the
// return of the Write that caused an event until a stream's Recv returned
// it (an event received before its Write returned counts as 0). The lag is
// the median of the iterations' percentiles. writes-ms is how long the
// 10,000 writes took (median): events the streams have not taken yet queue
// in the backend, so when the writes end well before the delivery does, the
// lag is mostly that queue.
func BenchmarkW8(b *testing.B) {
	for _, transport := range []string{"inproc", "grpc", "grpc-batched", "grpc-batched-pbdecode"} {
		b.Run(transport, func(b *testing.B) { benchW8(b, transport) })
	}
}

func benchW8(b *testing.B, transport string) {
	const (
		streams   = 100
		writes    = 10_000
		lagSample = 10 // time one event in lagSample per stream
	)
	names := make([]string, writes)
	for i := range names {
		names[i] = widgetName(i)
	}
	payload := mustAny(b, &pbfoov1.Zip{Zap: "a small payload for a widget"})

	var (
		totalEvents  float64
		totalElapsed time.Duration
		totalCPU     time.Duration
		totalAllocs  uint64
		p99s         []time.Duration
		writeSpans   []time.Duration
	)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		env, client, stop := benchEnv(b, strings.TrimSuffix(strings.TrimSuffix(transport, "-pbdecode"), "-batched"))
		req := &pbresource.WatchListRequest{Type: widgetType, BatchEvents: strings.Contains(transport, "-batched")}
		var opts []grpc.CallOption
		ctx, cancel := context.WithCancel(context.Background())
		// Times are taken relative to base, which is set before any
		// goroutine starts.
		base := time.Now()
		returned := make([]time.Duration, writes) // written by the writer only
		lags := make([][]time.Duration, streams)  // receive times; stream w writes lags[w] only
		errs := make(chan error, streams)
		var ready, wg sync.WaitGroup
		for w := range streams {
			if strings.HasSuffix(transport, "-pbdecode") {
				opts = []grpc.CallOption{grpc.ForceCodecV2(pbdecode.NewCodec())}
			}
			stream, err := client.WatchList(ctx, req, opts...)
			if err != nil {
				b.Fatal(err)
			}
			stream = pbresource.Unbatched(stream)
			lags[w] = make([]time.Duration, 0, writes/lagSample+1)
			ready.Add(1)
			wg.Go(func() {
				ev, err := stream.Recv()
				ready.Done()
				if err != nil || ev.GetEndOfSnapshot() == nil {
					errs <- fmt.Errorf("stream %d: want EndOfSnapshot, got %v, %v", w, ev, err)
					return
				}
				for i := range writes {
					ev, err := stream.Recv()
					if err != nil {
						errs <- fmt.Errorf("stream %d, event %d: %w", w, i, err)
						return
					}
					if got := ev.GetUpsert().GetResource().GetId().GetName(); got != names[i] {
						errs <- fmt.Errorf("stream %d, event %d: got %q, want an upsert of %q", w, i, got, names[i])
						return
					}
					// Reading the clock is not free; time a sample.
					if (i+w)%lagSample == 0 {
						lags[w] = append(lags[w], time.Since(base))
					}
				}
			})
		}
		ready.Wait()
		b.StartTimer()

		span := benchutil.Start()
		first := time.Since(base)
		for i, name := range names {
			if _, err := env.client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
				Id: widgetID(name), Metadata: map[string]string{"team": "bench"}, Data: payload,
			}}); err != nil {
				b.Fatal(err)
			}
			returned[i] = time.Since(base)
		}
		wg.Wait()
		r := span.Stop()
		b.StopTimer()
		cancel()
		stop()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}

		totalEvents += streams * writes
		totalElapsed += r.Wall
		totalCPU += r.CPU
		totalAllocs += r.Allocs
		all := make([]time.Duration, 0, streams*(writes/lagSample+1))
		for w, l := range lags {
			for j, at := range l {
				// The j-th timed event of stream w is event i.
				i := j*lagSample + (lagSample-w%lagSample)%lagSample
				all = append(all, max(0, at-returned[i]))
			}
		}
		slices.Sort(all)
		p99s = append(p99s, all[len(all)*99/100])
		writeSpans = append(writeSpans, returned[writes-1]-first)
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(p99s)
	slices.Sort(writeSpans)
	b.ReportMetric(totalEvents/totalElapsed.Seconds(), "events/s")
	b.ReportMetric(float64(totalCPU.Nanoseconds())/totalEvents, "cpu-ns/event")
	b.ReportMetric(float64(p99s[len(p99s)/2].Microseconds())/1e3, "lag-p99-ms")
	b.ReportMetric(float64(writeSpans[len(writeSpans)/2].Microseconds())/1e3, "writes-ms")
	b.ReportMetric(float64(totalAllocs)/totalEvents, "allocs/event")
}

// BenchmarkDelete measures a Delete through the in-process client: of a
// resource that owns nothing (the common case: no tombstone is stored), and
// of an owner of one resource (the backend stores a tombstone in the same
// step). Each iteration creates what it deletes; the reported time includes
// those creates.
func BenchmarkDelete(b *testing.B) {
	for _, owns := range []int{0, 1} {
		b.Run(fmt.Sprintf("owns=%d", owns), func(b *testing.B) {
			_, client, stop := benchEnv(b, "inproc")
			defer stop()
			ctx := context.Background()
			data := mustAny(b, &pbfoov1.Zip{Zap: "x"})
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				owner, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: widgetID(widgetName(i)), Data: data}})
				if err != nil {
					b.Fatal(err)
				}
				for c := range owns {
					_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
						Id: widgetID(widgetName(i) + "-child-" + strconv.Itoa(c)), Owner: owner.Resource.Id, Data: data,
					}})
					if err != nil {
						b.Fatal(err)
					}
				}
				if _, err := client.Delete(ctx, &pbresource.DeleteRequest{Id: owner.Resource.Id}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
