package upsert_test

import (
	"context"
	"errors"
	"testing"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/finalizer"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/loomrt/loom/upsert"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// onBothServices runs test against Loom's service and against the same
// service behaving like Consul's (resourcetest.ConsulLike), which keeps a
// resource marked until it is deleted again once its last finalizer goes.
func onBothServices(t *testing.T, test func(t *testing.T, svc *resourcetest.Service)) {
	t.Run("loom", func(t *testing.T) {
		test(t, resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes)))
	})
	t.Run("consul-like", func(t *testing.T) {
		test(t, resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes), resourcetest.ConsulLike(0)))
	})
}

// writeZip writes the owner, a Zip (no reaper runs in these tests: what a
// deleted Zip owned stays until the test deletes it).
func writeZip(t *testing.T, svc *resourcetest.Service, name string) *pbresource.Resource {
	return svc.Resource(foo.ZipType, name).WithData(t, &pbfoov1.Zip{Zap: name}).Write(t, svc.Client)
}

// recreate deletes the Zip and writes it again: a new lifetime of its name.
func recreate(t *testing.T, svc *resourcetest.Service, zip *pbresource.Resource) *pbresource.Resource {
	_, err := svc.Client.Delete(context.Background(), &pbresource.DeleteRequest{Id: zip.Id})
	require.NoError(t, err)
	again := writeZip(t, svc, zip.Id.Name)
	require.NotEqual(t, zip.Id.Uid, again.Id.Uid)
	return again
}

// staleBar makes Bar "b" owned by Zip "z" (the Bar as mutate leaves it),
// then deletes the Zip and writes it again. It returns the new Zip and the
// Bar its earlier lifetime owns.
func staleBar(t *testing.T, svc *resourcetest.Service, mutate upsert.MutateFunc) (zip, bar *pbresource.Resource) {
	t.Helper()
	zip = writeZip(t, svc, "z")
	bar, _, err := upsert.CreateOrUpdateOwned(context.Background(), svc.Client, zip.Id, barID("b"), mutate)
	require.NoError(t, err)
	return recreate(t, svc, zip), bar
}

func TestOwnedCreateUpdateUnchanged(t *testing.T) {
	onBothServices(t, func(t *testing.T, svc *resourcetest.Service) {
		ctx := context.Background()
		zip := writeZip(t, svc, "z")
		var ownerSeen *pbresource.ID
		created, result, err := upsert.CreateOrUpdateOwned(ctx, svc.Client, zip.Id, barID("b"), func(res *pbresource.Resource) error {
			ownerSeen = resource.CloneID(res.Owner)
			return setBaz("one")(res)
		})
		require.NoError(t, err)
		assert.Equal(t, upsert.Created, result)
		assert.True(t, resource.EqualID(zip.Id, ownerSeen), "mutate sees the owner on creation")
		assert.True(t, resource.EqualID(zip.Id, created.Owner), "created with the owner: %v", created.Owner)
		assert.True(t, resource.EqualID(zip.Id, read(t, svc.Client, barID("b")).Owner))

		updated, result, err := upsert.CreateOrUpdateOwned(ctx, svc.Client, zip.Id, barID("b"), setBaz("two"))
		require.NoError(t, err)
		assert.Equal(t, upsert.Updated, result)
		assert.Equal(t, created.Id.Uid, updated.Id.Uid)
		assert.Equal(t, "two", baz(t, updated))

		same, result, err := upsert.CreateOrUpdateOwned(ctx, svc.Client, zip.Id, barID("b"), setBaz("two"))
		require.NoError(t, err)
		assert.Equal(t, upsert.Unchanged, result)
		assert.Equal(t, updated.Version, same.Version)
	})
}

// A resource that is not the owner's is left alone, whoever it belongs to,
// with an error that says whose it is and what to do; mutate is not called
// and nothing is written, with or without ReplaceStale.
func TestOwnedRefusesWhatIsNotTheOwners(t *testing.T) {
	onBothServices(t, func(t *testing.T, svc *resourcetest.Service) {
		ctx := context.Background()
		zip := writeZip(t, svc, "z")
		other := writeZip(t, svc, "other")
		_, _, err := upsert.CreateOrUpdateOwned(ctx, svc.Client, zip.Id, barID("stale"), setBaz("old"))
		require.NoError(t, err)
		_, _, err = upsert.CreateOrUpdateOwned(ctx, svc.Client, other.Id, barID("others"), setBaz("other's"))
		require.NoError(t, err)
		_, _, err = upsert.CreateOrUpdate(ctx, svc.Client, barID("unowned"), setBaz("nobody's"))
		require.NoError(t, err)
		zip = recreate(t, svc, zip)

		for _, tc := range []struct {
			name    string
			stale   bool
			owner   *pbresource.ID
			message []string
		}{
			{name: "stale", stale: true, owner: &pbresource.ID{Name: "z"},
				message: []string{"foo.v1.Bar/default.default/stale@", "an earlier lifetime of foo.v1.Zip/default./z@" + zip.Id.Uid, "upsert.ReplaceStale()", "WithOwned"}},
			{name: "others", owner: other.Id,
				message: []string{"is owned by foo.v1.Zip/default./other@" + other.Id.Uid + ", not foo.v1.Zip/default./z@" + zip.Id.Uid, "cannot change", "another name"}},
			{name: "unowned",
				message: []string{"foo.v1.Bar/default.default/unowned@", "has no owner", "only be set when a resource is created", "another name"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := read(t, svc.Client, barID(tc.name))
				for _, opts := range [][]upsert.Option{nil, {upsert.ReplaceStale()}} {
					if tc.stale && len(opts) > 0 {
						continue // replaced: TestReplaceStale
					}
					got, result, err := upsert.CreateOrUpdateOwned(ctx, svc.Client, zip.Id, barID(tc.name), func(*pbresource.Resource) error {
						t.Error("mutate called on a resource that is not the owner's")
						return nil
					}, opts...)
					var owned *upsert.AlreadyOwnedError
					require.ErrorAs(t, err, &owned)
					assert.Nil(t, got)
					assert.Equal(t, upsert.Unchanged, result)
					assert.Equal(t, tc.stale, owned.Stale())
					assert.True(t, resource.EqualID(before.Id, owned.Resource))
					assert.True(t, resource.EqualID(zip.Id, owned.Wanted))
					if tc.owner == nil {
						assert.Nil(t, owned.Owner)
					} else {
						assert.Equal(t, tc.owner.Name, owned.Owner.Name)
					}
					for _, m := range tc.message {
						assert.Contains(t, err.Error(), m)
					}
					assert.Equal(t, before.Version, read(t, svc.Client, barID(tc.name)).Version, "nothing written")
				}
			})
		}
	})
}

// ReplaceStale deletes a resource of an earlier lifetime of the owner and
// creates the owner's own at once when nothing holds the old one.
func TestReplaceStale(t *testing.T) {
	onBothServices(t, func(t *testing.T, svc *resourcetest.Service) {
		ctx := context.Background()
		zip, old := staleBar(t, svc, setBaz("old"))

		got, result, err := upsert.CreateOrUpdateOwned(ctx, svc.Client, zip.Id, barID("b"), setBaz("new"), upsert.ReplaceStale())
		require.NoError(t, err)
		assert.Equal(t, upsert.Created, result)
		assert.NotEqual(t, old.Id.Uid, got.Id.Uid)
		assert.True(t, resource.EqualID(zip.Id, got.Owner))
		stored := read(t, svc.Client, barID("b"))
		assert.Equal(t, got.Id.Uid, stored.Id.Uid)
		assert.Equal(t, "new", baz(t, stored))
	})
}

// A stale resource that finalizers hold is only marked: the call says the
// replacement is pending, and creates it once the finalizers are gone.
func TestReplaceStaleHeldByFinalizers(t *testing.T) {
	onBothServices(t, func(t *testing.T, svc *resourcetest.Service) {
		ctx := context.Background()
		zip, _ := staleBar(t, svc, func(res *pbresource.Resource) error {
			finalizer.AddFinalizer(res, "test/hold")
			return setBaz("old")(res)
		})

		replace := func() (*pbresource.Resource, upsert.Result, error) {
			return upsert.CreateOrUpdateOwned(ctx, svc.Client, zip.Id, barID("b"), setBaz("new"), upsert.ReplaceStale())
		}
		got, result, err := replace()
		require.ErrorIs(t, err, upsert.ErrReplacePending)
		assert.Nil(t, got)
		assert.Equal(t, upsert.Unchanged, result)
		assert.Contains(t, err.Error(), "its finalizers (test/hold) hold it")
		assert.Contains(t, err.Error(), "WithOwned")
		marked := read(t, svc.Client, barID("b"))
		assert.True(t, resource.IsMarkedForDeletion(marked))

		// Again while it is held: the same answer, and nothing written.
		_, _, err = replace()
		require.ErrorIs(t, err, upsert.ErrReplacePending)
		assert.Equal(t, marked.Version, read(t, svc.Client, barID("b")).Version)

		// Its finalizer's controller lets it go (on Consul it stays, marked,
		// until it is deleted again: the next call does that).
		released := resource.Clone(marked)
		finalizer.RemoveFinalizer(released, "test/hold")
		_, err = svc.Client.Write(ctx, &pbresource.WriteRequest{Resource: released})
		require.NoError(t, err)

		got, result, err = replace()
		require.NoError(t, err)
		assert.Equal(t, upsert.Created, result)
		assert.NotEqual(t, marked.Id.Uid, got.Id.Uid)
		assert.True(t, resource.EqualID(zip.Id, got.Owner))
		assert.False(t, resource.IsMarkedForDeletion(read(t, svc.Client, barID("b"))))
	})
}

// reaperFirst deletes what its caller deletes just before the caller's own
// Delete reaches the service, as the reaper racing ReplaceStale would.
type reaperFirst struct {
	pbresource.ResourceServiceClient
	deletes int
}

func (c *reaperFirst) Delete(ctx context.Context, in *pbresource.DeleteRequest, opts ...grpc.CallOption) (*pbresource.DeleteResponse, error) {
	c.deletes++
	if _, err := c.ResourceServiceClient.Delete(ctx, in, opts...); err != nil {
		return nil, err
	}
	return c.ResourceServiceClient.Delete(ctx, in, opts...)
}

func TestReplaceStaleAfterTheReaper(t *testing.T) {
	onBothServices(t, func(t *testing.T, svc *resourcetest.Service) {
		ctx := context.Background()
		zip, _ := staleBar(t, svc, setBaz("old"))

		client := &reaperFirst{ResourceServiceClient: svc.Client}
		got, result, err := upsert.CreateOrUpdateOwned(ctx, client, zip.Id, barID("b"), setBaz("new"), upsert.ReplaceStale())
		require.NoError(t, err)
		assert.Equal(t, 1, client.deletes)
		assert.Equal(t, upsert.Created, result)
		assert.True(t, resource.EqualID(zip.Id, got.Owner))
	})
}

func TestOwnedBadInput(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	ctx := context.Background()
	zip := writeZip(t, svc, "z")

	byName := resource.CloneID(zip.Id)
	byName.Uid = ""
	_, _, err := upsert.CreateOrUpdateOwned(ctx, svc.Client, byName, barID("b"), setBaz("x"))
	assert.ErrorContains(t, err, "needs the owner's ID with its type, name and Uid")
	_, _, err = upsert.CreateOrUpdateOwned(ctx, svc.Client, nil, barID("b"), setBaz("x"))
	assert.ErrorContains(t, err, "needs the owner's ID")

	_, _, err = upsert.CreateOrUpdateOwned(ctx, svc.Client, zip.Id, barID("b"), func(res *pbresource.Resource) error {
		res.Owner = nil
		return setBaz("x")(res)
	})
	assert.ErrorContains(t, err, "changed the owner")
	_, err = svc.Client.Read(ctx, &pbresource.ReadRequest{Id: barID("b")})
	assert.Equal(t, codes.NotFound, status.Code(err), "nothing written")
}

// An owner deleted and created again while the call runs: the create names
// the owner's Uid, so the service refuses it rather than give the new
// lifetime a resource meant for the old one.
func TestOwnedCreateNamesTheOwnersLifetime(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	ctx := context.Background()
	zip := writeZip(t, svc, "z")
	_, _, err := upsert.CreateOrUpdateOwned(ctx, svc.Client, zip.Id, barID("b"), func(res *pbresource.Resource) error {
		recreate(t, svc, zip)
		return setBaz("x")(res)
	})
	require.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	assert.ErrorContains(t, err, "owner")
	var owned *upsert.AlreadyOwnedError
	assert.False(t, errors.As(err, &owned))
}
