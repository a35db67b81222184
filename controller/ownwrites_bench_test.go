package controller

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller/queue"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
)

// BenchmarkHoldCycle measures, in one goroutine, what read-your-own-writes
// adds to a key's round through the queue: the worker hands the key back
// before the cache has applied the version its reconcile wrote, and the
// watch then marks that version applied. bound=0 is the same round with
// the wait off.
// With recorder, the round includes what every reconcile pays: opening the
// worker's write recorder, one WriteStatus through it (to a client that
// answers at once) and closing it.
func BenchmarkHoldCycle(b *testing.B) {
	for _, bound := range []time.Duration{0, time.Second} {
		b.Run(fmt.Sprintf("bound=%s", bound), func(b *testing.B) { benchHoldCycle(b, bound, false) })
		b.Run(fmt.Sprintf("bound=%s/recorder", bound), func(b *testing.B) { benchHoldCycle(b, bound, true) })
	}
}

// versionClient answers WriteStatus with the version in rsp.
type versionClient struct {
	pbresource.ResourceServiceClient
	rsp pbresource.WriteStatusResponse
}

func (c *versionClient) WriteStatus(context.Context, *pbresource.WriteStatusRequest, ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	return &c.rsp, nil
}

func benchHoldCycle(b *testing.B, bound time.Duration, recorder bool) {
	typ := &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"}
	c := cache.New()
	if err := c.AddType(typ); err != nil {
		b.Fatal(err)
	}
	applied, err := c.Applied(typ)
	if err != nil {
		b.Fatal(err)
	}
	q := queue.New[reconcile.RequestKey, reconcile.Request](queue.Options{})
	o := &ownWrites{q: q, bound: bound, timeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: "t"}), logger: hclog.NewNullLogger()}
	key := reconcile.RequestKey{Partition: "p", Namespace: "n", Name: "k"}
	written := []writtenType{{typ: typ, applied: applied}}
	client := &versionClient{rsp: pbresource.WriteStatusResponse{Resource: &pbresource.Resource{}}}
	var w writeRecorder
	w.init(client, c)
	req := &pbresource.WriteStatusRequest{Id: &pbresource.ID{Type: &pbresource.Type{Group: "g", GroupVersion: "v1", Kind: "K"}}}
	ctx := context.Background()
	var gs gates
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		q.Add(key, reconcile.Request{})
		item, _ := q.Get()
		if recorder {
			client.rsp.Resource.Version = strconv.Itoa(i + 1)
			if _, err := w.WriteStatus(ctx, req); err != nil {
				b.Fatal(err)
			}
			written = w.take()
		} else {
			written[0].version = uint64(i + 1)
		}
		o.handBack(item, time.Time{}, written, &gs)
		applied.Mark(uint64(i + 1))
	}
	if !q.Idle() {
		b.Fatal("the key is still held")
	}
	o.stop()
}
