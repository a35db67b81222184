//go:build cluster

package clustertest

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	loometcd "github.com/loomrt/loom/storage/etcd"
)

// TestKillKeepsHistory writes to one server of a cluster from several
// clients, each creating resources and changing their data (so each
// acknowledged write is a new generation), kills the server with SIGKILL
// in the middle of the writes, starts it again, and checks that every
// acknowledged write is in the history at its version with its
// generation: the history is written in the write's own transaction, so
// no acknowledged write can miss it.
func TestKillKeepsHistory(t *testing.T) {
	const (
		clients = 4
		names   = 25 // per client
		updates = 5  // per name, below the 20 versions kept
		killAt  = 150
	)
	c := startCluster(t)
	s := c.servers[0]

	type ack struct {
		id                  *pbresource.ID
		version, generation string
	}
	var (
		mu    sync.Mutex
		acked []ack
		wg    sync.WaitGroup
	)
	enough := make(chan struct{})
	var once sync.Once
	for cl := range clients {
		wg.Go(func() {
			ctx := context.Background()
			for n := range names {
				id := &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: fmt.Sprintf("kill-%d-%d", cl, n)}
				for u := range updates {
					data, err := anypb.New(&pbfoov1.Zip{Zap: "version " + strconv.Itoa(u)})
					if err != nil {
						t.Error(err)
						return
					}
					wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					out, err := s.client.Write(wctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: id, Data: data}})
					cancel()
					if err != nil {
						return // the server is gone: this write's outcome is unknown
					}
					mu.Lock()
					acked = append(acked, ack{id: out.Resource.Id, version: out.Resource.Version, generation: out.Resource.Generation})
					if len(acked) >= killAt {
						once.Do(func() { close(enough) })
					}
					mu.Unlock()
				}
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(2 * time.Minute):
		t.Fatal("the writes were not acknowledged in time")
	}
	s.kill()
	wg.Wait()
	t.Logf("%d writes acknowledged before the kill", len(acked))

	restarted := startLoom(t, c.dir, c.bin, s.node+"-restarted", c.endpoints, serverAddrs{grpc: "127.0.0.1:0", http: "127.0.0.1:0"})
	if _, err := restarted.client.List(context.Background(), &pbresource.ListRequest{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}}); err != nil {
		t.Fatalf("the restarted server does not serve: %v", err)
	}

	h := loometcd.New(c.etcd, loometcd.WithPrefix("/loom-cluster-test"))
	ctx := context.Background()
	for _, a := range acked {
		r, err := h.ReadRevision(ctx, a.id, a.version)
		if err != nil {
			t.Errorf("acknowledged write of %s at %s: %v", a.id.Name, a.version, err)
			continue
		}
		if r.Deleted || r.Resource.Generation != a.generation {
			t.Errorf("acknowledged write of %s at %s: history has generation %s (deleted %v), want %s", a.id.Name, a.version, r.Resource.Generation, r.Deleted, a.generation)
		}
	}
}
