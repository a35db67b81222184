package reaper_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/server"
	"github.com/loomrt/loom/server/reaper"
	"github.com/loomrt/loom/server/reaper/reapertest"
	"github.com/loomrt/loom/storage/inmem"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
)

func write(t *testing.T, client pbresource.ResourceServiceClient, typ *pbresource.Type, name string, owner *pbresource.ID) *pbresource.Resource {
	t.Helper()
	var data *anypb.Any
	var err error
	if resource.EqualUnversionedType(typ, foo.BarV1Type) {
		data, err = anypb.New(&pbfoov1.Bar{Baz: name})
	} else {
		data, err = anypb.New(&pbfoov1.Zip{Zap: name})
	}
	require.NoError(t, err)
	rsp, err := client.Write(context.Background(), &pbresource.WriteRequest{Resource: &pbresource.Resource{
		Id:    &pbresource.ID{Type: typ, Name: name},
		Owner: owner,
		Data:  data,
	}})
	require.NoError(t, err)
	return rsp.Resource
}

func exists(client pbresource.ResourceServiceClient, id *pbresource.ID) bool {
	_, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: id})
	return status.Code(err) != codes.NotFound
}

func countTombstones(t *testing.T, client pbresource.ResourceServiceClient) int {
	rsp, err := client.List(context.Background(), &pbresource.ListRequest{
		Type:    resource.TypeV1Tombstone,
		Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"},
	})
	require.NoError(t, err)
	return len(rsp.Resources)
}

// runReaper runs the reaper until stop is called.
func runReaper(t *testing.T, client pbresource.ResourceServiceClient) (stop func()) {
	return reapertest.RunReaper(t, client)
}

func TestCascadingDeletion(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	runReaper(t, client)

	// zip owns two bars; one bar owns a zip (grandchild).
	root := write(t, client, foo.ZipType, "root", nil)
	child1 := write(t, client, foo.BarV1Type, "child-1", root.Id)
	child2 := write(t, client, foo.BarV1Type, "child-2", root.Id)
	grandchild := write(t, client, foo.ZipType, "grandchild", child1.Id)
	bystander := write(t, client, foo.BarV1Type, "bystander", nil)

	_, err := client.Delete(context.Background(), &pbresource.DeleteRequest{Id: root.Id})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return !exists(client, child1.Id) && !exists(client, child2.Id) && !exists(client, grandchild.Id) && countTombstones(t, client) == 0
	}, 10*time.Second, 5*time.Millisecond)
	require.True(t, exists(client, bystander.Id))
}

// failingDeletes fails every Delete after the first n, as a server that
// dies in the middle of a cascade would.
type failingDeletes struct {
	pbresource.ResourceServiceClient
	left atomic.Int32
}

func (c *failingDeletes) Delete(ctx context.Context, in *pbresource.DeleteRequest, opts ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	if c.left.Add(-1) < 0 {
		return nil, status.Error(codes.Unavailable, "test: server going away")
	}
	return c.ResourceServiceClient.Delete(ctx, in, opts...)
}

func TestCascadeSurvivesARestartInTheMiddle(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	root := write(t, client, foo.ZipType, "root", nil)
	var children []*pbresource.Resource
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		children = append(children, write(t, client, foo.BarV1Type, n, root.Id))
	}
	_, err := client.Delete(context.Background(), &pbresource.DeleteRequest{Id: root.Id})
	require.NoError(t, err)
	require.Equal(t, 1, countTombstones(t, client), "the promise is stored before any reaper runs")

	// The first reaper manages two deletions, then its server "dies".
	dying := &failingDeletes{ResourceServiceClient: client}
	dying.left.Store(2)
	stop := runReaper(t, dying)
	require.Eventually(t, func() bool {
		gone := 0
		for _, c := range children {
			if !exists(client, c.Id) {
				gone++
			}
		}
		return gone == 2 && dying.left.Load() < 0
	}, 10*time.Second, time.Millisecond)
	stop()
	require.Equal(t, 1, countTombstones(t, client))

	// A new reaper finishes the job.
	runReaper(t, client)
	require.Eventually(t, func() bool {
		for _, c := range children {
			if exists(client, c.Id) {
				return false
			}
		}
		return countTombstones(t, client) == 0
	}, 10*time.Second, 5*time.Millisecond)
}

func TestNoTombstoneWithoutChildren(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	lonely := write(t, client, foo.ZipType, "lonely", nil)
	_, err := client.Delete(context.Background(), &pbresource.DeleteRequest{Id: lonely.Id})
	require.NoError(t, err)
	require.Zero(t, countTombstones(t, client))
}

func TestTombstoneOfLiveOwnerIsDropped(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	client := svc.Client
	owner := write(t, client, foo.ZipType, "owner", nil)
	child := write(t, client, foo.BarV1Type, "child", owner.Id)

	// The service never stores a tombstone while its owner lives, and
	// refuses tombstones from clients; put one in the store directly, as
	// an older server might have left it.
	data, err := anypb.New(&pbresource.Tombstone{Owner: owner.Id})
	require.NoError(t, err)
	id := server.TombstoneID(owner.Id)
	id.Uid = resource.NewULID()
	_, err = svc.Backend.WriteCAS(context.Background(), &pbresource.Resource{Id: id, Generation: resource.NewULID(), Data: data})
	require.NoError(t, err)

	runReaper(t, client)
	require.Eventually(t, func() bool { return countTombstones(t, client) == 0 }, 10*time.Second, 5*time.Millisecond,
		"the tombstone of a live owner is dropped")
	require.True(t, exists(client, child.Id), "nothing is reaped while the owner lives")
	require.True(t, exists(client, owner.Id))

	// Deleting the owner now leaves a real tombstone, which is carried out.
	_, err = client.Delete(context.Background(), &pbresource.DeleteRequest{Id: owner.Id})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return !exists(client, child.Id) && countTombstones(t, client) == 0 },
		10*time.Second, 5*time.Millisecond)
}

// TestNoOrphans races creates of owned resources against their owner's
// deletion on the in-memory backend: nothing acknowledged survives the
// reaper.
func TestNoOrphans(t *testing.T) {
	reapertest.RunOwnerDeleteRace(t, inmem.New(), reapertest.Race{Owners: 300, Creators: 4, Timeout: 30 * time.Second})
}

// pageCounter records the size of every ListByOwner reply.
type pageCounter struct {
	pbresource.ResourceServiceClient
	pages, largest atomic.Int32
}

func (c *pageCounter) ListByOwner(ctx context.Context, in *pbresource.ListByOwnerRequest, opts ...grpc.CallOption) (*pbresource.ListByOwnerResponse, error) {
	rsp, err := c.ResourceServiceClient.ListByOwner(ctx, in, opts...)
	if err == nil {
		c.pages.Add(1)
		for n := int32(len(rsp.Resources)); ; {
			old := c.largest.Load()
			if n <= old || c.largest.CompareAndSwap(old, n) {
				break
			}
		}
	}
	return rsp, err
}

// TestCascadeInPages: the reaper lists an owner of many resources in pages
// of at most 1,000, and deletes them all.
func TestCascadeInPages(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	counter := &pageCounter{ResourceServiceClient: client}
	runReaper(t, counter)

	root := write(t, client, foo.ZipType, "root", nil)
	const n = 2100
	var last *pbresource.Resource
	for i := range n {
		last = write(t, client, foo.BarV1Type, "child-"+strconv.Itoa(i), root.Id)
	}
	_, err := client.Delete(context.Background(), &pbresource.DeleteRequest{Id: root.Id})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return !exists(client, last.Id) && countTombstones(t, client) == 0
	}, 30*time.Second, 10*time.Millisecond)
	rsp, err := client.List(context.Background(), &pbresource.ListRequest{Type: foo.BarV1Type, Tenancy: &pbresource.Tenancy{Partition: "*", Namespace: "*"}})
	require.NoError(t, err)
	require.Empty(t, rsp.Resources, "every child was deleted")
	require.GreaterOrEqual(t, counter.pages.Load(), int32(3), "2,100 children take 3 pages")
	require.LessOrEqual(t, counter.largest.Load(), int32(1000), "no page holds more than 1,000")
}

// TestRecreatedOwner deletes an owner and creates it again before the
// reaper has removed what its earlier lifetime owned, on the in-memory
// backend: the new owner ends up with a child of its own.
func TestRecreatedOwner(t *testing.T) {
	reapertest.RunRecreatedOwner(t, inmem.New())
}

// replacesFirst replaces the child named replace, before the Delete of it
// that it forwards, with one owned by newOwner: the owner's new lifetime
// replacing its child (upsert.ReplaceStale) between the reaper's listing
// and its Delete.
type replacesFirst struct {
	pbresource.ResourceServiceClient
	t        *testing.T
	replace  *pbresource.ID
	newOwner *pbresource.ID
	replaced *pbresource.Resource
}

func (c *replacesFirst) Delete(ctx context.Context, in *pbresource.DeleteRequest, opts ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	if c.replaced == nil && resource.EqualID(in.Id, c.replace) {
		_, err := c.ResourceServiceClient.Delete(ctx, in, opts...)
		require.NoError(c.t, err)
		c.replaced = write(c.t, c.ResourceServiceClient, c.replace.Type, c.replace.Name, c.newOwner)
	}
	return c.ResourceServiceClient.Delete(ctx, in, opts...)
}

// The reaper's Delete of a child names the child's Uid: a child replaced
// meanwhile by the owner's new lifetime is spared, and the reaper carries
// on without an error.
func TestReaperSparesAChildReplacedMeanwhile(t *testing.T) {
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	owner := write(t, client, foo.ZipType, "owner", nil)
	child := write(t, client, foo.BarV1Type, "child", owner.Id)
	_, err := client.Delete(context.Background(), &pbresource.DeleteRequest{Id: owner.Id})
	require.NoError(t, err)
	again := write(t, client, foo.ZipType, "owner", nil)

	racing := &replacesFirst{ResourceServiceClient: client, t: t, replace: child.Id, newOwner: again.Id}
	h := resourcetest.NewControllerHarness(t, racing, reaper.Controller())
	h.Sync(t)
	tombs, err := client.List(context.Background(), &pbresource.ListRequest{Type: resource.TypeV1Tombstone, Tenancy: &pbresource.Tenancy{Partition: "default"}})
	require.NoError(t, err)
	require.Len(t, tombs.Resources, 1)
	require.NoError(t, h.Reconcile(t, tombs.Resources[0].Id))

	require.NotNil(t, racing.replaced, "the child was replaced before the reaper's Delete")
	rsp, err := client.Read(context.Background(), &pbresource.ReadRequest{Id: &pbresource.ID{Type: foo.BarV1Type, Name: "child"}})
	require.NoError(t, err)
	require.Equal(t, racing.replaced.Id.Uid, rsp.Resource.Id.Uid, "the new lifetime's child is spared")
	require.Zero(t, countTombstones(t, client))
}
