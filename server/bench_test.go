package server

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
)

// widgetType is the benchmarks' resource type: namespace-scoped, no hooks,
// a small message as data.
var widgetType = &pbresource.Type{Group: "bench", GroupVersion: "v1", Kind: "Widget"}

func widgetID(i int) *pbresource.ID {
	return &pbresource.ID{
		Type:    widgetType,
		Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"},
		Name:    fmt.Sprintf("widget-%d", i),
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkW7 is workload W7 of BENCHMARKS.md: the service's operations
// through the in-process client and over loopback gRPC, with 1 and 4 client
// goroutines. It reports process CPU per operation next to wall time.
func BenchmarkW7(b *testing.B) {
	for _, transport := range []string{"inproc", "grpc"} {
		for _, clients := range []int{1, 4} {
			for _, op := range []string{"write-create", "write-update", "writestatus", "read", "list-10k"} {
				name := fmt.Sprintf("%s/%s/clients=%d", transport, op, clients)
				b.Run(name, func(b *testing.B) { benchOp(b, transport, op, clients) })
			}
		}
	}
}

func benchOp(b *testing.B, transport, op string, clients int) {
	env := newEnv(b)
	env.registry.Register(resource.Registration{Type: widgetType, Proto: &pbfoov1.Zip{}, Scope: resource.ScopeNamespace})
	client := env.client
	if transport == "grpc" {
		client = grpcClientB(b, env)
	}
	ctx := context.Background()
	data := mustAny(b, &pbfoov1.Zip{Zap: "some widget data"})

	seed := 1
	if op == "list-10k" {
		seed = 10_000
	}
	var stored []*pbresource.Resource
	for i := range seed {
		out, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: widgetID(i), Data: data}})
		if err != nil {
			b.Fatal(err)
		}
		stored = append(stored, out.Resource)
	}
	var counter atomic.Int64
	counter.Store(int64(seed))

	do := func() error {
		switch op {
		case "write-create":
			i := int(counter.Add(1))
			_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: widgetID(i), Data: data}})
			return err
		case "write-update":
			i := counter.Add(1)
			_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
				Id: widgetID(0), Data: mustAny(b, &pbfoov1.Zip{Zap: fmt.Sprint(i)}),
			}})
			return err
		case "writestatus":
			_, err := client.WriteStatus(ctx, &pbresource.WriteStatusRequest{
				Id: stored[0].Id, Key: "bench.widget", Status: simpleStatus(stored[0].Generation),
			})
			return err
		case "read":
			_, err := client.Read(ctx, &pbresource.ReadRequest{Id: widgetID(0)})
			return err
		case "list-10k":
			out, err := client.List(ctx, &pbresource.ListRequest{Type: widgetType})
			if err == nil && len(out.Resources) != seed {
				err = fmt.Errorf("listed %d", len(out.Resources))
			}
			return err
		}
		return nil
	}

	b.ReportAllocs()
	b.SetParallelism(1)
	cpu0 := processCPU()
	start := time.Now()
	b.ResetTimer()
	if clients == 1 {
		for range b.N {
			if err := do(); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		var next atomic.Int64
		done := make(chan error, clients)
		for range clients {
			go func() {
				for next.Add(1) <= int64(b.N) {
					if err := do(); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
		}
		for range clients {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	elapsed := time.Since(start)
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ops/s")
}
