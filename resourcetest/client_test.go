package resourcetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
)

// shortWaits keeps the failing waits of these tests quick.
const shortWaits = 150 * time.Millisecond

// setup starts a service and returns a client whose waits give up fast.
func setup(t *testing.T) (*resourcetest.Service, *resourcetest.Client) {
	svc := startService(t)
	return svc, resourcetest.NewClient(svc.Client).WithTimeout(shortWaits).WithPollInterval(5 * time.Millisecond)
}

func writeBar(t *testing.T, svc *resourcetest.Service, name, baz string) *pbresource.Resource {
	t.Helper()
	return svc.Resource(foo.BarV1Type, name).WithData(t, &pbfoov1.Bar{Baz: baz}).Write(t, svc.Client)
}

func TestNewClientKeepsAWrappedClient(t *testing.T) {
	svc := startService(t)
	c := resourcetest.NewClient(svc.Client)
	require.Same(t, c, resourcetest.NewClient(c))
}

func TestRequireResourceExists(t *testing.T) {
	svc, client := setup(t)
	bar := writeBar(t, svc, "bar", "hello")

	got := client.RequireResourceExists(t, bar.Id)
	require.Equal(t, bar.Version, got.Version)

	missing := svc.Resource(foo.BarV1Type, "missing").ID()
	f := runFake(func(ft *fakeT) { client.RequireResourceExists(ft, missing) })
	requireFailed(t, f, true, "RequireResourceExists foo.v1.Bar/default.default/missing", "it does not exist", "observed: no such resource")
}

func TestRequireResourceNotFound(t *testing.T) {
	svc, client := setup(t)
	client.RequireResourceNotFound(t, svc.Resource(foo.BarV1Type, "missing").ID())

	bar := writeBar(t, svc, "bar", "shown-in-the-message")
	f := runFake(func(ft *fakeT) { client.RequireResourceNotFound(ft, bar.Id) })
	requireFailed(t, f, true, "RequireResourceNotFound foo.v1.Bar/default.default/bar", "it still exists",
		"observed resource:", `"shown-in-the-message"`, bar.Id.Uid)
}

func TestRequireVersion(t *testing.T) {
	svc, client := setup(t)
	bar := writeBar(t, svc, "bar", "one")

	client.RequireVersionUnchanged(t, bar.Id, bar.Version)
	f := runFake(func(ft *fakeT) { client.RequireVersionChanged(ft, bar.Id, bar.Version) })
	requireFailed(t, f, true, "RequireVersionChanged foo.v1.Bar/default.default/bar", "the version is still")

	// Status writes change the version too.
	bar2 := svc.Resource(foo.BarV1Type, "bar").
		WithStatus("s", &pbresource.Status{Conditions: []*pbresource.Condition{accepted("x")}}).
		WithData(t, &pbfoov1.Bar{Baz: "one"}).
		Write(t, svc.Client)
	got := client.RequireVersionChanged(t, bar.Id, bar.Version)
	require.Equal(t, bar2.Version, got.Version)
	f = runFake(func(ft *fakeT) { client.RequireVersionUnchanged(ft, bar.Id, bar.Version) })
	requireFailed(t, f, true, "RequireVersionUnchanged", "the version changed from")

	f = runFake(func(ft *fakeT) {
		client.RequireVersionUnchanged(ft, svc.Resource(foo.BarV1Type, "missing").ID(), "1")
	})
	requireFailed(t, f, true, "it does not exist")
}

func TestRequireStatusCondition(t *testing.T) {
	svc, client := setup(t)
	bar := svc.Resource(foo.BarV1Type, "bar").
		WithData(t, &pbfoov1.Bar{Baz: "one"}).
		WithStatus("s", &pbresource.Status{Conditions: []*pbresource.Condition{accepted("Yes")}}).
		Write(t, svc.Client)

	client.RequireStatusCondition(t, bar.Id, "s", accepted("Yes"))
	client.RequireStatusConditionForCurrentGen(t, bar.Id, "s", accepted("Yes"))
	client.RequireStatusConditionAbsent(t, bar.Id, "s", "Other")
	client.RequireStatusConditionAbsent(t, bar.Id, "no-such-key", "Accepted")

	cases := map[string]struct {
		run   func(ft *fakeT)
		wants []string
	}{
		"a condition that differs": {
			run:   func(ft *fakeT) { client.RequireStatusCondition(ft, bar.Id, "s", accepted("No")) },
			wants: []string{"RequireStatusCondition foo.v1.Bar/default.default/bar", `status "s" has a different "Accepted" condition`, `"No"`, `"Yes"`},
		},
		"a condition type that is missing": {
			run:   func(ft *fakeT) { client.RequireStatusCondition(ft, bar.Id, "s", &pbresource.Condition{Type: "Other"}) },
			wants: []string{`status "s" has no "Other" condition`},
		},
		"a status key that is missing": {
			run:   func(ft *fakeT) { client.RequireStatusCondition(ft, bar.Id, "t", accepted("Yes")) },
			wants: []string{`there is no status "t"`},
		},
		"a condition that is present": {
			run:   func(ft *fakeT) { client.RequireStatusConditionAbsent(ft, bar.Id, "s", "Accepted") },
			wants: []string{"RequireStatusConditionAbsent", `status "s" has a "Accepted" condition`, `"Yes"`},
		},
		"a missing resource": {
			run: func(ft *fakeT) {
				client.RequireStatusCondition(ft, svc.Resource(foo.BarV1Type, "missing").ID(), "s", accepted("Yes"))
			},
			wants: []string{"foo.v1.Bar/default.default/missing", "it does not exist"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			requireFailed(t, runFake(tc.run), true, tc.wants...)
		})
	}

	// After a data change the old status is for an older generation.
	newer := writeBar(t, svc, "bar", "two")
	client.RequireStatusCondition(t, bar.Id, "s", accepted("Yes"))
	f := runFake(func(ft *fakeT) { client.RequireStatusConditionForCurrentGen(ft, bar.Id, "s", accepted("Yes")) })
	requireFailed(t, f, true, "RequireStatusConditionForCurrentGen", "observed generation "+bar.Generation, "generation is "+newer.Generation)
}

func TestWaitForStatusConditionTimesOutShowingTheLastState(t *testing.T) {
	svc, client := setup(t)
	bar := svc.Resource(foo.BarV1Type, "bar").
		WithData(t, &pbfoov1.Bar{Baz: "last-seen"}).
		WithStatus("s", &pbresource.Status{Conditions: []*pbresource.Condition{accepted("Old")}}).
		Write(t, svc.Client)

	start := time.Now()
	f := runFake(func(ft *fakeT) { client.WaitForStatusCondition(ft, bar.Id, "s", accepted("New")) })
	elapsed := time.Since(start)

	out := requireFailed(t, f, true,
		"WaitForStatusCondition foo.v1.Bar/default.default/bar",
		`expected: status "s" holds this condition, observed for the resource's current generation`,
		`"New"`,
		"gave up after",
		`status "s" has a different "Accepted" condition`,
		"observed resource:",
		`"last-seen"`,
		bar.Version,
	)
	require.NotContains(t, out, "context deadline exceeded", "the message is more than a bare timeout")
	require.Less(t, elapsed, shortWaits+time.Second, "the wait honours the client's timeout")
	require.GreaterOrEqual(t, elapsed, shortWaits/2)
}

func TestWaitForStatusConditionSeesALaterWrite(t *testing.T) {
	svc, _ := setup(t)
	client := resourcetest.NewClient(svc.Client).WithPollInterval(time.Millisecond)
	bar := writeBar(t, svc, "bar", "x")
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := svc.Client.WriteStatus(context.Background(), &pbresource.WriteStatusRequest{
			Id: bar.Id, Key: "s",
			Status: &pbresource.Status{ObservedGeneration: bar.Generation, Conditions: []*pbresource.Condition{accepted("Later")}},
		})
		if err != nil {
			t.Errorf("writing the status: %v", err)
		}
	}()
	res := client.WaitForStatusCondition(t, bar.Id, "s", accepted("Later"))
	require.Equal(t, "Later", res.Status["s"].Conditions[0].Reason)
	<-done
}

func TestWaitForStatusConditionWantsTheCurrentGeneration(t *testing.T) {
	svc, client := setup(t)
	bar := svc.Resource(foo.BarV1Type, "bar").
		WithData(t, &pbfoov1.Bar{Baz: "one"}).
		WithStatus("s", &pbresource.Status{Conditions: []*pbresource.Condition{accepted("Yes")}}).
		Write(t, svc.Client)
	writeBar(t, svc, "bar", "two")
	f := runFake(func(ft *fakeT) { client.WaitForStatusCondition(ft, bar.Id, "s", accepted("Yes")) })
	requireFailed(t, f, true, "observed generation "+bar.Generation)
}

func TestWaitForNewVersion(t *testing.T) {
	svc, client := setup(t)
	bar := writeBar(t, svc, "bar", "one")

	f := runFake(func(ft *fakeT) { client.WaitForNewVersion(ft, bar.Id, bar.Version) })
	requireFailed(t, f, true, "WaitForNewVersion", "the version is still "+`"`+bar.Version+`"`, `"one"`)

	done := make(chan *pbresource.Resource, 1)
	go func() { done <- writeBar(t, svc, "bar", "two") }()
	got := client.WithTimeout(5*time.Second).WaitForNewVersion(t, bar.Id, bar.Version)
	require.NotEqual(t, bar.Version, got.Version)
	<-done
}

func TestWaitForResourceState(t *testing.T) {
	svc, client := setup(t)
	bar := writeBar(t, svc, "bar", "one")

	t.Run("passes once the check passes", func(t *testing.T) {
		attempts := 0
		res := client.WithTimeout(5*time.Second).WaitForResourceState(t, bar.Id, func(t resourcetest.T, res *pbresource.Resource) {
			attempts++
			require.GreaterOrEqual(t, attempts, 3, "not yet")
		})
		require.Equal(t, 3, attempts)
		require.Equal(t, bar.Version, res.Version)
	})

	t.Run("the check gets its own copy", func(t *testing.T) {
		client.WaitForResourceState(t, bar.Id, func(_ resourcetest.T, res *pbresource.Resource) {
			res.Id.Name = "changed"
		})
		client.RequireResourceExists(t, bar.Id)
	})

	t.Run("a failing check shows its last complaint and the resource", func(t *testing.T) {
		f := runFake(func(ft *fakeT) {
			client.WaitForResourceState(ft, bar.Id, func(t resourcetest.T, res *pbresource.Resource) {
				b, err := resource.Decode[*pbfoov1.Bar](res)
				require.NoError(t, err)
				require.Equal(t, "wanted-baz", b.Baz, "baz is wrong")
			})
		})
		out := requireFailed(t, f, true, "WaitForResourceState foo.v1.Bar/default.default/bar",
			"gave up after", "baz is wrong", "wanted-baz", "observed resource:", `"one"`)
		require.NotContains(t, out, "the check failed without saying why")
	})

	t.Run("Errorf without FailNow also fails an attempt", func(t *testing.T) {
		f := runFake(func(ft *fakeT) {
			client.WaitForResourceState(ft, bar.Id, func(t resourcetest.T, res *pbresource.Resource) {
				t.Errorf("first problem")
				t.Errorf("second problem")
			})
		})
		requireFailed(t, f, true, "first problem\n", "second problem")
	})

	t.Run("a missing resource", func(t *testing.T) {
		called := false
		f := runFake(func(ft *fakeT) {
			client.WaitForResourceState(ft, svc.Resource(foo.BarV1Type, "missing").ID(), func(resourcetest.T, *pbresource.Resource) { called = true })
		})
		requireFailed(t, f, true, "it does not exist", "observed: no such resource")
		require.False(t, called)
	})

	t.Run("cleanups of an attempt run after it", func(t *testing.T) {
		ran := 0
		client.WaitForResourceState(t, bar.Id, func(t resourcetest.T, _ *pbresource.Resource) {
			t.Cleanup(func() { ran++ })
		})
		require.Equal(t, 1, ran)
	})
}

func TestWaitForResourceExists(t *testing.T) {
	svc, client := setup(t)
	id := svc.Resource(foo.BarV1Type, "later").ID()
	f := runFake(func(ft *fakeT) { client.WaitForResourceExists(ft, id) })
	requireFailed(t, f, true, "WaitForResourceExists foo.v1.Bar/default.default/later", "it does not exist")

	go writeBar(t, svc, "later", "x")
	res := client.WithTimeout(5*time.Second).WaitForResourceExists(t, id)
	require.Equal(t, "later", res.Id.Name)
}

func TestDeletion(t *testing.T) {
	svc, client := setup(t)

	t.Run("MustDelete", func(t *testing.T) {
		bar := writeBar(t, svc, "plain", "x")
		client.MustDelete(t, bar.Id)
		client.RequireResourceNotFound(t, bar.Id)
		client.MustDelete(t, bar.Id) // deleting what is gone is fine
	})

	t.Run("MustDelete reports errors", func(t *testing.T) {
		bar := writeBar(t, svc, "wrong-uid", "x")
		id := resource.CloneID(bar.Id)
		id.Uid = resource.NewULID()
		f := runFake(func(ft *fakeT) { client.MustDelete(ft, id) })
		requireFailed(t, f, true, "MustDelete foo.v1.Bar/default.default/wrong-uid", "FailedPrecondition")
	})

	t.Run("WaitForDeletion waits for finalizers", func(t *testing.T) {
		b := svc.Resource(foo.BarV1Type, "finalized").
			WithData(t, &pbfoov1.Bar{Baz: "x"}).
			WithMeta(resource.FinalizerKey, "test.finalizer")
		bar := b.Write(t, svc.Client)
		client.MustDelete(t, bar.Id)
		marked := client.RequireResourceExists(t, bar.Id)
		require.True(t, resource.IsMarkedForDeletion(marked))

		f := runFake(func(ft *fakeT) { client.WaitForDeletion(ft, bar.Id) })
		requireFailed(t, f, true, "WaitForDeletion foo.v1.Bar/default.default/finalized", "it still exists", resource.DeletionTimestampKey)

		go func() {
			delete(marked.Metadata, resource.FinalizerKey)
			if _, err := svc.Client.Write(context.Background(), &pbresource.WriteRequest{Resource: marked}); err != nil {
				t.Errorf("removing the finalizer: %v", err)
			}
		}()
		client.WithTimeout(5*time.Second).WaitForDeletion(t, bar.Id)
	})

	t.Run("CleanupDelete", func(t *testing.T) {
		bar := writeBar(t, svc, "cleaned", "x")
		gone := writeBar(t, svc, "gone-already", "x")
		f := runFake(func(ft *fakeT) {
			client.CleanupDelete(ft, bar.Id)
			client.CleanupDelete(ft, gone.Id)
			client.MustDelete(ft, gone.Id)
			client.RequireResourceExists(ft, bar.Id) // still there during the test
		})
		requirePassed(t, f)
		client.RequireResourceNotFound(t, bar.Id)
	})
}
