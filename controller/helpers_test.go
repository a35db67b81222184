package controller_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/anypb"
)

// startService runs a ResourceService with the example types.
func startService(t *testing.T) *resourcetest.Service {
	return resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
}

func barID(name string) *pbresource.ID {
	return &pbresource.ID{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "default", Namespace: "default"}, Name: name}
}

func zipID(name string) *pbresource.ID {
	return &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: name}
}

func writeBar(t testing.TB, client pbresource.ResourceServiceClient, name, baz string, qux *pbresource.ID) *pbresource.Resource {
	t.Helper()
	data, err := anypb.New(&pbfoov1.Bar{Baz: baz, Qux: qux})
	require.NoError(t, err)
	rsp, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: barID(name), Data: data}})
	require.NoError(t, err)
	return rsp.Resource
}

func writeZip(t testing.TB, client pbresource.ResourceServiceClient, name string) *pbresource.Resource {
	t.Helper()
	data, err := anypb.New(&pbfoov1.Zip{Zap: name})
	require.NoError(t, err)
	rsp, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{Id: zipID(name), Data: data}})
	require.NoError(t, err)
	return rsp.Resource
}

// runManager starts m.Run in the background and stops it when the test
// ends, failing the test if Run does not return.
func runManager(t *testing.T, m *controller.Manager) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stop := func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Errorf("manager did not stop")
		}
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(stop) })
	return func() { once.Do(stop) }
}

func newManager(t *testing.T, client pbresource.ResourceServiceClient, opts ...controller.ManagerOption) *controller.Manager {
	t.Helper()
	opts = append([]controller.ManagerOption{controller.WithWatchRetry(time.Millisecond, 20*time.Millisecond)}, opts...)
	m, err := controller.NewManager(client, nil, opts...)
	require.NoError(t, err)
	return m
}

// counter counts calls by key, safely.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) inc(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return c.n[key]
}

func (c *counter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	sum := 0
	for _, v := range c.n {
		sum += v
	}
	return sum
}

func names(n int, prefix string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}
