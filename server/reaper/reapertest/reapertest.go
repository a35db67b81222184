// Package reapertest checks cascading deletion end to end on any storage
// backend: a ResourceService and the reaper over the backend, with clients
// creating owned resources while their owner is deleted. Backends' own tests
// call it (storage/inmem through the reaper's tests, storage/etcd in its
// module).
package reapertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/reaper"
	"github.com/loomrt/loom/storage"
)

// RunReaper runs the reaper against client, on a leader Manager of its own
// with short retry and backoff times, until stop is called or the test
// ends.
func RunReaper(t testing.TB, client pbresource.ResourceServiceClient) (stop func()) {
	t.Helper()
	m, err := controller.NewManager(client, nil, controller.WithWatchRetry(time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, m.Register(reaper.Controller().WithBackoff(time.Millisecond, 20*time.Millisecond)))
	m.SetLeader(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = m.Run(ctx); close(done) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// Race is the shape of a RunOwnerDeleteRace run.
type Race struct {
	// Owners is how many owners are created and deleted, one after the
	// other.
	Owners int
	// Creators is how many clients create owned resources while each
	// owner is deleted; each creates two.
	Creators int
	// Timeout bounds the creates and deletes, and then again the wait for
	// the reaper to settle.
	Timeout time.Duration
}

// RunOwnerDeleteRace serves b (empty) with the example types and the
// reaper, races creates of owned resources against each owner's Delete, and
// fails t unless, once the reaper settles, no resource whose creation was
// acknowledged is left (no orphan) and no tombstone remains. Creates that
// lose the race must fail with InvalidArgument.
func RunOwnerDeleteRace(t *testing.T, b storage.Backend, race Race) {
	t.Helper()
	reg := resource.NewRegistry()
	require.NoError(t, foo.RegisterTypes(reg))
	client := server.NewInProcessClient(server.New(server.Config{Backend: b, Registry: reg}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*race.Timeout)
	defer cancel()

	defer RunReaper(t, client)()

	barData, err := anypb.New(&pbfoov1.Bar{Baz: "child"})
	require.NoError(t, err)
	zipData, err := anypb.New(&pbfoov1.Zip{Zap: "owner"})
	require.NoError(t, err)

	var created []*pbresource.ID
	refused := 0
	for i := range race.Owners {
		ownerRsp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
			Id: &pbresource.ID{Type: foo.ZipType, Name: fmt.Sprintf("owner-%d", i)}, Data: zipData,
		}})
		require.NoError(t, err)
		owner := ownerRsp.Resource.Id

		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var unexpected []error
		for c := range race.Creators {
			wg.Go(func() {
				<-start
				for n := range 2 {
					rsp, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
						Id:    &pbresource.ID{Type: foo.BarV1Type, Name: fmt.Sprintf("child-%d-%d-%d", i, c, n)},
						Owner: owner,
						Data:  barData,
					}})
					mu.Lock()
					switch status.Code(err) {
					case codes.OK:
						created = append(created, rsp.Resource.Id)
					case codes.InvalidArgument:
						refused++
					default:
						unexpected = append(unexpected, err)
					}
					mu.Unlock()
				}
			})
		}
		var delErr error
		wg.Go(func() {
			<-start
			_, delErr = client.Delete(ctx, &pbresource.DeleteRequest{Id: owner})
		})
		close(start)
		wg.Wait()
		require.NoError(t, delErr, "deleting owner %d", i)
		require.Empty(t, unexpected, "creates failed for another reason than a missing owner")
	}
	t.Logf("%d owned resources created and %d refused while their owners were deleted", len(created), refused)

	deadline := time.Now().Add(race.Timeout)
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		left, tombs := remaining(ctx, client, created)
		if len(left) == 0 && tombs == 0 {
			return
		}
		if time.Now().After(deadline) {
			require.Failf(t, "the reaper did not settle",
				"%d orphans (of %d owned resources created) and %d tombstones left after %v; first orphans: %v",
				len(left), len(created), tombs, race.Timeout, left[:min(len(left), 5)])
		}
		<-poll.C
	}
}

// remaining returns which of ids still exist and how many tombstones are
// stored (-1 if they cannot be listed).
func remaining(ctx context.Context, client pbresource.ResourceServiceClient, ids []*pbresource.ID) ([]string, int) {
	var left []string
	for _, id := range ids {
		_, err := client.Read(ctx, &pbresource.ReadRequest{Id: id})
		if status.Code(err) != codes.NotFound {
			left = append(left, resource.IDString(id))
		}
	}
	tombs, err := client.List(ctx, &pbresource.ListRequest{
		Type:    resource.TypeV1Tombstone,
		Tenancy: &pbresource.Tenancy{Partition: storage.Wildcard, Namespace: storage.Wildcard},
	})
	if err != nil {
		return left, -1
	}
	return left, len(tombs.Resources)
}

// CheckEmbeddedCascades runs mgr, the Manager that builtin.New returned
// with srv (whose registry has the example types), until the test ends;
// creates a Zip owning a Bar; deletes the Zip; and fails t unless the Bar is
// deleted within timeout: the server cascades deletions as it is embedded.
func CheckEmbeddedCascades(t *testing.T, srv *server.Server, mgr *controller.Manager, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	mgrCtx, stopMgr := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = mgr.Run(mgrCtx); close(done) }()
	t.Cleanup(func() { stopMgr(); <-done })

	client := server.NewInProcessClient(srv)
	tenancy := &pbresource.Tenancy{Partition: "default", Namespace: "default"}
	zipData, err := anypb.New(&pbfoov1.Zip{Zap: "owner"})
	require.NoError(t, err)
	owner, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id: &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "embedded-owner"}, Data: zipData,
	}})
	require.NoError(t, err)
	barData, err := anypb.New(&pbfoov1.Bar{Baz: "child"})
	require.NoError(t, err)
	child, err := client.Write(ctx, &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id: &pbresource.ID{Type: foo.BarV1Type, Tenancy: tenancy, Name: "embedded-child"}, Owner: owner.Resource.Id, Data: barData,
	}})
	require.NoError(t, err)

	_, err = client.Delete(ctx, &pbresource.DeleteRequest{Id: owner.Resource.Id})
	require.NoError(t, err)
	for {
		_, err := client.Read(ctx, &pbresource.ReadRequest{Id: child.Resource.Id})
		if status.Code(err) == codes.NotFound {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the owned resource %s is still there %v after its owner was deleted (last read: %v): the embedded server does not cascade deletions",
				resource.IDString(child.Resource.Id), timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
