package resourcetest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resourcetest"
)

func TestWaitForList(t *testing.T) {
	svc, client := setup(t)
	writeBar(t, svc, "a", "x")
	svc.Resource(foo.BarV1Type, "b").WithTenancy(&pbresource.Tenancy{Partition: "p", Namespace: "n"}).
		WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, svc.Client)
	svc.Resource(foo.BarV2Type, "v2").WithData(t, &pbfoov2.Bar{Baz: "x"}).Write(t, svc.Client)

	t.Run("waits for the list to pass the check", func(t *testing.T) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			writeBar(t, svc, "c", "x")
		}()
		got := client.WithTimeout(5*time.Second).WaitForList(t, foo.BarV1Type, func(t resourcetest.T, list []*pbresource.Resource) {
			require.Len(t, list, 3)
		})
		<-done
		// Every tenancy, only the type's GroupVersion, ordered by ID.
		var names []string
		for _, res := range got {
			names = append(names, res.Id.Name)
		}
		require.Equal(t, []string{"a", "c", "b"}, names)
	})

	t.Run("the check gets its own copies", func(t *testing.T) {
		got := client.WaitForList(t, foo.BarV1Type, func(_ resourcetest.T, list []*pbresource.Resource) {
			list[0].Id.Name = "changed"
		})
		require.Equal(t, "a", got[0].Id.Name)
	})

	t.Run("a failure shows the check's complaint and what was listed", func(t *testing.T) {
		f := runFake(func(ft *fakeT) {
			client.WaitForList(ft, foo.BarV1Type, func(t resourcetest.T, list []*pbresource.Resource) {
				require.Len(t, list, 4, "want four bars")
			})
		})
		out := requireFailed(t, f, true, "WaitForList foo.v1.Bar", "gave up after", "want four bars",
			"observed 3 resource(s):", "foo.v1.Bar/default.default/a@", "foo.v1.Bar/p.n/b@", "version ")
		require.NotContains(t, out, "foo.v2.Bar")
	})

	t.Run("a type the service does not know", func(t *testing.T) {
		f := runFake(func(ft *fakeT) {
			client.WaitForList(ft, &pbresource.Type{Group: "no", GroupVersion: "v1", Kind: "Such"}, func(resourcetest.T, []*pbresource.Resource) {})
		})
		requireFailed(t, f, true, "listing failed", "InvalidArgument", "observed: no resources")
	})
}

func TestWaitForListFailureIsBounded(t *testing.T) {
	svc, client := setup(t)
	for i := 0; i < 25; i++ {
		writeBar(t, svc, fmt.Sprintf("bar-%02d", i), "x")
	}
	f := runFake(func(ft *fakeT) {
		client.WaitForList(ft, foo.BarV1Type, func(t resourcetest.T, _ []*pbresource.Resource) { t.Errorf("never") })
	})
	out := requireFailed(t, f, true, "observed 25 resource(s):", "bar-19@", "… and 5 more")
	require.NotContains(t, out, "bar-20")
}

func TestWaitForOwned(t *testing.T) {
	svc, client := setup(t)
	owner := svc.Resource(foo.ZipType, "owner").WithData(t, &pbfoov1.Zip{Zap: "z"}).Write(t, svc.Client)
	other := svc.Resource(foo.ZipType, "other").WithData(t, &pbfoov1.Zip{Zap: "z"}).Write(t, svc.Client)
	svc.Resource(foo.BarV1Type, "a").WithData(t, &pbfoov1.Bar{Baz: "x"}).WithOwner(owner.Id).Write(t, svc.Client)
	svc.Resource(foo.BarV1Type, "not-owned").WithData(t, &pbfoov1.Bar{Baz: "x"}).WithOwner(other.Id).Write(t, svc.Client)
	svc.Resource(foo.ZipType, "child").WithData(t, &pbfoov1.Zip{Zap: "z"}).WithOwner(owner.Id).Write(t, svc.Client)

	t.Run("waits for the count", func(t *testing.T) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			svc.Resource(foo.BarV2Type, "b").WithData(t, &pbfoov2.Bar{Baz: "x"}).WithOwner(owner.Id).Write(t, svc.Client)
		}()
		got := client.WithTimeout(5*time.Second).WaitForOwned(t, owner.Id, 3)
		<-done
		require.Len(t, got, 3)
	})

	t.Run("by type, any GroupVersion", func(t *testing.T) {
		got := client.WaitForOwned(t, owner.Id, 2, foo.BarV1Type)
		require.Equal(t, "a", got[0].Id.Name)
		require.Equal(t, "b", got[1].Id.Name)
		client.WaitForOwned(t, owner.Id, 1, foo.ZipType)
		client.WaitForOwned(t, owner.Id, 3, foo.ZipType, foo.BarV1Type)
	})

	t.Run("an owner ID without a Uid", func(t *testing.T) {
		client.WaitForOwned(t, svc.Resource(foo.ZipType, "owner").ID(), 3)
	})

	t.Run("exactly n", func(t *testing.T) {
		f := runFake(func(ft *fakeT) { client.WaitForOwned(ft, owner.Id, 2) })
		out := requireFailed(t, f, true, "WaitForOwned owner foo.v1.Zip/default./owner@"+owner.Id.Uid,
			"expected: exactly 2 owned resource(s)", "gave up after", "3 owned resource(s), not 2",
			"observed 3 resource(s):", "foo.v1.Bar/default.default/a@", "foo.v1.Zip/default./child@")
		require.NotContains(t, out, "not-owned")

		f = runFake(func(ft *fakeT) { client.WaitForOwned(ft, owner.Id, 4, foo.BarV1Type) })
		requireFailed(t, f, true, "exactly 4 owned resource(s) of type foo.v1.Bar", "2 owned resource(s), not 4")
	})

	t.Run("a missing owner", func(t *testing.T) {
		f := runFake(func(ft *fakeT) { client.WaitForOwned(ft, svc.Resource(foo.ZipType, "missing").ID(), 0) })
		requireFailed(t, f, true, "the owner does not exist", "observed: no resources")
	})
}
