package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller/queue"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	managedType = &pbresource.Type{Group: "test", GroupVersion: "v1", Kind: "Managed"}
	watchedType = &pbresource.Type{Group: "test", GroupVersion: "v1", Kind: "Watched"}
)

// newTestMappers returns the mapper runner of a controller managing
// managedType, with a long backoff so retries stay pending.
func newTestMappers(t *testing.T) *mappers {
	met, err := newMetrics(nil)
	require.NoError(t, err)
	s := &subscription{
		c:     &Controller{name: "test", managedType: managedType, baseBackoff: time.Hour, maxBackoff: time.Hour},
		queue: queue.New[reconcile.RequestKey, reconcile.Request](queue.Options{}),
	}
	s.inbox.init()
	m := &mappers{s: s, logger: hclog.NewNullLogger(), met: met.forMappers("test"), retries: map[retryKey]*mapperRetry{}}
	t.Cleanup(func() {
		m.stopRetries()
		s.queue.ShutDownNow()
	})
	return m
}

func change(name, version string, mapper reconcile.DependencyMapper) mapperJob {
	res := &pbresource.Resource{
		Id:      &pbresource.ID{Type: watchedType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: name},
		Version: version,
	}
	return mapperJob{mapper: mapper, event: cache.Event{Kind: cache.Upserted, Resource: res}}
}

// However often a resource changes while its mapper fails, it holds one
// pending retry, carrying its latest change; a change that maps cancels it.
func TestMapperRetriesAreBoundedPerResource(t *testing.T) {
	m := newTestMappers(t)
	ctx := context.Background()
	fail := func(context.Context, reconcile.Runtime, *pbresource.Resource) ([]reconcile.Request, error) {
		return nil, errors.New("failing")
	}
	for i := 0; i < 100; i++ {
		m.run(ctx, change("a", string(rune('0'+i%10)), fail))
		m.run(ctx, change("b", "1", fail))
	}
	require.Len(t, m.retries, 2)
	a := m.retries[retryKeyOf(change("a", "", nil))]
	require.NotNil(t, a)
	assert.Equal(t, "9", a.job.event.Resource.Version, "the retry carries the latest change")
	assert.Equal(t, 100, a.failures)

	ok := func(context.Context, reconcile.Runtime, *pbresource.Resource) ([]reconcile.Request, error) {
		return nil, nil
	}
	m.run(ctx, change("a", "10", ok))
	assert.Len(t, m.retries, 1)
	// The cancelled retry's timer may have fired already: its job is
	// skipped.
	a.job.mapper = func(context.Context, reconcile.Runtime, *pbresource.Resource) ([]reconcile.Request, error) {
		t.Error("a cancelled retry ran")
		return nil, nil
	}
	m.run(ctx, mapperJob{retry: a})
	assert.Len(t, m.retries, 1)
}
