package resourcetest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/loomrt/loom/cache"
	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbhistoryv1 "github.com/loomrt/loom/proto/pbhistory/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
)

// The code between "snippet:" and "end snippet" comments is quoted in
// docs/testing.md; TestDocSnippets keeps the two identical.

// snippet: controller
// acceptedKey is the status key the bar-acceptor controller writes.
const acceptedKey = "example.accepted"

// barController accepts a foo.v1.Bar when the foo.v1.Zip its qux field
// names exists. It watches Zips, so a Zip that appears or goes away is
// routed (through the "bars-by-zip" index) to the Bars that name it.
func barController() *controller.Controller {
	return controller.NewController("bar-acceptor", foo.BarV1Type, barsByZip).
		WithWatch(foo.ZipType, mapZipToBars).
		WithReconciler(reconcile.AsDecoded(reconcileBar))
}

var barsByZip = cache.NewDecodedIndex("bars-by-zip",
	func(_ *pbresource.Resource, bar *pbfoov1.Bar) (string, bool, error) {
		if bar.Qux == nil {
			return "", false, nil
		}
		return cache.Key(bar.Qux), true, nil
	})

func mapZipToBars(_ context.Context, rt reconcile.Runtime, zip *pbresource.Resource) ([]reconcile.Request, error) {
	ids, err := rt.Cache.ListIDsReadOnly(foo.BarV1Type, "bars-by-zip", cache.Key(zip.Id))
	if err != nil {
		return nil, err
	}
	return reconcile.RequestsFromIDs(ids), nil
}

func reconcileBar(ctx context.Context, rt reconcile.Runtime, _ reconcile.Request, bar *resource.Decoded[*pbfoov1.Bar]) error {
	cond := accepted("NoZip")
	if qux := bar.Data.Qux; qux != nil {
		zip, err := cache.GetDecodedByIDReadOnly[*pbfoov1.Zip](rt.Cache, qux)
		if err != nil {
			return err
		}
		cond = accepted("ZipFound")
		if zip == nil {
			cond = zipMissing(qux.Name)
		}
	}
	_, err := rt.WriteStatus(ctx, bar.Resource, acceptedKey, &pbresource.Status{Conditions: []*pbresource.Condition{cond}})
	return err
}

func accepted(reason string) *pbresource.Condition {
	return &pbresource.Condition{Type: "Accepted", State: pbresource.Condition_STATE_TRUE, Reason: reason}
}

func zipMissing(name string) *pbresource.Condition {
	return &pbresource.Condition{
		Type:    "Accepted",
		State:   pbresource.Condition_STATE_FALSE,
		Reason:  "ZipMissing",
		Message: fmt.Sprintf("zip %q does not exist", name),
	}
}

// end snippet

// exampleT stands in for a test's *testing.T in the examples, which have
// none: a failure panics, which fails the example.
type exampleT struct {
	errors   []string
	cleanups []func()
}

func (t *exampleT) Helper()             {}
func (t *exampleT) Logf(string, ...any) {}
func (t *exampleT) Cleanup(f func())    { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Errorf(format string, a ...any) {
	t.errors = append(t.errors, fmt.Sprintf(format, a...))
}
func (t *exampleT) FailNow() { panic(strings.Join(t.errors, "\n")) }

// finish runs the cleanups, as a test's end does, and panics on errors.
func (t *exampleT) finish() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	if len(t.errors) > 0 {
		panic(strings.Join(t.errors, "\n"))
	}
}

// RunResourceService is the shortest way to a service with your types.
func ExampleRunResourceService() {
	t := &exampleT{}
	defer t.finish()

	// snippet: run-service
	client := resourcetest.RunResourceService(t, foo.RegisterTypes)
	// end snippet

	res := resourcetest.Resource(foo.QuxType, "qux").WithData(t, &pbfoov1.Qux{Note: "hi"}).Write(t, client)
	fmt.Println(resource.IDString(&pbresource.ID{Type: res.Id.Type, Tenancy: res.Id.Tenancy, Name: res.Id.Name}))
	// Output:
	// foo.v1.Qux/./qux
}

// A resource is declared with a builder. Build returns the message; its
// tenancy is what was given, the service fills in the rest on Write.
func ExampleResource() {
	t := &exampleT{}
	defer t.finish()

	// snippet: builder
	res := resourcetest.Resource(foo.BarV1Type, "bar").
		WithTenancy(&pbresource.Tenancy{Namespace: "team-a"}).
		WithData(t, &pbfoov1.Bar{Baz: "hello"}).
		WithMeta("team", "a").
		Build()
	fmt.Println(resource.IDString(res.Id))
	// end snippet

	// Output:
	// foo.v1.Bar/.team-a/bar
}

// A builder made by a Service knows the registered types, so ID fills in
// the tenancy defaults of each type's scope, as the service will.
func ExampleService_Resource() {
	t := &exampleT{}
	defer t.finish()

	// snippet: service-resource
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))

	fmt.Println(resource.IDString(svc.Resource(foo.BarV1Type, "bar").ID())) // namespace scope
	fmt.Println(resource.IDString(svc.Resource(foo.ZipType, "zip").ID()))   // partition scope
	fmt.Println(resource.IDString(svc.Resource(foo.QuxType, "qux").ID()))   // cluster scope
	// end snippet

	// Output:
	// foo.v1.Bar/default.default/bar
	// foo.v1.Zip/default./zip
	// foo.v1.Qux/./qux
}

// Run the controller against an in-process service and wait for it to
// act.
func ExampleRunControllers() {
	t := &exampleT{}
	defer t.finish()

	// snippet: run-controllers
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	client := resourcetest.NewClient(svc.Client)
	resourcetest.RunControllers(t, client, barController())

	zip := svc.Resource(foo.ZipType, "zip").
		WithData(t, &pbfoov1.Zip{Zap: "zap"}).
		Write(t, client)
	bar := svc.Resource(foo.BarV1Type, "bar").
		WithData(t, &pbfoov1.Bar{Baz: "baz", Qux: zip.Id}).
		Write(t, client)

	client.WaitForStatusCondition(t, bar.Id, acceptedKey, accepted("ZipFound"))

	// Delete the Zip: the controller hears of it through its watch.
	client.MustDelete(t, zip.Id)
	client.WaitForStatusCondition(t, bar.Id, acceptedKey, zipMissing("zip"))
	// end snippet

	fmt.Println("accepted, then rejected")
	// Output:
	// accepted, then rejected
}

// RequireSettled checks that a controller has nothing left to do: no
// write to the watched types for a window, observed through a watch.
func ExampleClient_RequireSettled() {
	t := &exampleT{}
	defer t.finish()
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	client := resourcetest.NewClient(svc.Client)
	resourcetest.RunControllers(t, client, barController())
	bar := svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "baz"}).Write(t, client)

	// snippet: settled
	client.WaitForStatusCondition(t, bar.Id, acceptedKey, accepted("NoZip"))
	// Reconciling again (the status write is an event too) writes nothing.
	client.RequireSettled(t, 200*time.Millisecond, foo.BarV1Type, foo.ZipType)
	// end snippet

	fmt.Println("settled")
	// Output:
	// settled
}

// WaitForResourceState retries a check written like a test, with
// testify's require, until it passes.
func ExampleClient_WaitForResourceState() {
	t := &exampleT{}
	defer t.finish()
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	client := resourcetest.NewClient(svc.Client)
	resourcetest.RunControllers(t, client, barController())
	bar := svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "baz"}).Write(t, client)

	// snippet: wait-for-state
	res := client.WaitForResourceState(t, bar.Id, func(t resourcetest.T, res *pbresource.Resource) {
		st := res.Status[acceptedKey]
		require.NotNil(t, st, "no status yet")
		require.Equal(t, res.Generation, st.ObservedGeneration, "status is for an older generation")
		require.Equal(t, "NoZip", st.Conditions[0].Reason)
	})
	// end snippet

	fmt.Println(res.Status[acceptedKey].Conditions[0].State)
	// Output:
	// STATE_TRUE
}

// ControllerHarness runs one Reconcile or one mapper call at a time, with
// no Manager: every step is explicit.
func ExampleControllerHarness() {
	t := &exampleT{}
	defer t.finish()

	// snippet: harness
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	h := resourcetest.NewControllerHarness(t, svc.Client, barController())

	// The Bar names a Zip that does not exist yet. Service.Resource gives
	// the Zip's ID with its tenancy filled in, as the cache keys it.
	bar := h.Write(t, svc.Resource(foo.BarV1Type, "bar").
		WithData(t, &pbfoov1.Bar{Baz: "baz", Qux: svc.Resource(foo.ZipType, "zip").ID()}))
	if err := h.Reconcile(t, bar.Id); err != nil {
		t.Errorf("reconcile: %v", err)
	}
	h.Client.RequireStatusCondition(t, bar.Id, acceptedKey, zipMissing("zip"))

	// The Zip appears: the watch's mapper routes it to the Bar.
	zip := h.Write(t, svc.Resource(foo.ZipType, "zip").WithData(t, &pbfoov1.Zip{Zap: "zap"}))
	reqs, err := h.Map(t, zip)
	if err != nil || len(reqs) != 1 || reqs[0].ID.Name != "bar" {
		t.Errorf("mapping the zip: %v, %v", reqs, err)
	}
	if err := h.Reconcile(t, reqs[0].ID); err != nil {
		t.Errorf("reconcile: %v", err)
	}
	h.Client.RequireStatusCondition(t, bar.Id, acceptedKey, accepted("ZipFound"))
	// end snippet

	fmt.Println("ok")
	// Output:
	// ok
}

// snippet: table-test
func TestBarReconciler(t *testing.T) {
	cases := map[string]struct {
		zips []string // Zips that exist
		qux  string   // the Zip the Bar names, if any
		want *pbresource.Condition
	}{
		"no zip named": {want: accepted("NoZip")},
		"zip exists":   {zips: []string{"z"}, qux: "z", want: accepted("ZipFound")},
		"zip missing":  {zips: []string{"other"}, qux: "z", want: zipMissing("z")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
			h := resourcetest.NewControllerHarness(t, svc.Client, barController())
			for _, z := range tc.zips {
				h.Write(t, svc.Resource(foo.ZipType, z).WithData(t, &pbfoov1.Zip{Zap: z}))
			}
			data := &pbfoov1.Bar{Baz: "baz"}
			if tc.qux != "" {
				data.Qux = svc.Resource(foo.ZipType, tc.qux).ID()
			}
			bar := h.Write(t, svc.Resource(foo.BarV1Type, "bar").WithData(t, data))

			require.NoError(t, h.Reconcile(t, bar.Id))
			h.Client.RequireStatusConditionForCurrentGen(t, bar.Id, acceptedKey, tc.want)

			// Once the cache has caught up, reconciling again writes
			// nothing: the controller settles.
			h.Sync(t)
			before := h.Client.RequireResourceExists(t, bar.Id)
			require.NoError(t, h.Reconcile(t, bar.Id))
			h.Client.RequireVersionUnchanged(t, bar.Id, before.Version)
		})
	}
}

// end snippet

// With OverGRPC, Service.History is a client of Loom's history service:
// here a deleted resource is found in the trash and restored, as a new
// lifetime (a new Uid).
func ExampleService_history() {
	t := &exampleT{}
	defer t.finish()
	ctx := context.Background()
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes), resourcetest.OverGRPC())

	qux := svc.Resource(foo.QuxType, "qux").WithData(t, &pbfoov1.Qux{Note: "keep me"}).Write(t, svc.Client)
	if _, err := svc.Client.Delete(ctx, &pbresource.DeleteRequest{Id: qux.Id}); err != nil {
		panic(err)
	}

	trash, err := svc.History.ListTrash(ctx, &pbhistoryv1.ListTrashRequest{Type: foo.QuxType})
	if err != nil {
		panic(err)
	}
	for _, rev := range trash.Revisions {
		fmt.Println("in the trash:", rev.Resource.Id.Name)
	}
	restored, err := svc.History.Restore(ctx, &pbhistoryv1.RestoreRequest{Id: qux.Id})
	if err != nil {
		panic(err)
	}
	fmt.Println("restored:", restored.Resource.Id.Name, "with a new uid:", restored.Resource.Id.Uid != qux.Id.Uid)
	// Output:
	// in the trash: qux
	// restored: qux with a new uid: true
}
