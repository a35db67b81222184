package foo_test

// These tests show how to test a controller with the resourcetest kit: an
// end-to-end test that runs the controller against the real
// ResourceService, and a table test that runs one Reconcile at a time.

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	pbfoov2 "github.com/loomrt/loom/examples/foo/pbfoo/v2"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/resourcetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
)

// The conditions the controller is expected to write.
var (
	accepted = &pbresource.Condition{
		Type: foo.ConditionAccepted, State: pbresource.Condition_STATE_TRUE,
		Reason: foo.ReasonOk, Message: "the bar is valid",
	}
	noReference = &pbresource.Condition{
		Type: foo.ConditionResolvedRefs, State: pbresource.Condition_STATE_TRUE,
		Reason: foo.ReasonOk, Message: "the bar references nothing",
	}
)

// resolved is the condition of a Bar whose Zip exists.
func resolved(zip *pbresource.ID) *pbresource.Condition {
	return &pbresource.Condition{
		Type: foo.ConditionResolvedRefs, State: pbresource.Condition_STATE_TRUE,
		Reason: foo.ReasonOk, Message: "the referenced zip exists",
		Resource: resource.Reference(zip, ""),
	}
}

// missing is the condition of a Bar whose qux names nothing that exists.
func missing(ref *pbresource.ID, message string) *pbresource.Condition {
	return &pbresource.Condition{
		Type: foo.ConditionResolvedRefs, State: pbresource.Condition_STATE_FALSE,
		Reason: foo.ReasonMissingRef, Message: message,
		Resource: resource.Reference(ref, ""),
	}
}

// zipMissing is the message of a Bar whose Zip "zip" does not exist, or
// does not let Bars see it.
const zipMissing = `zip "zip" does not exist, or is not referable (metadata foo.bar/referable: "true")`

// zipID is the ID the service gives Zip "zip": partition-scoped, default
// partition.
var zipID = &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "zip"}

func TestBarControllerResolvesZips(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	client := resourcetest.NewClient(svc.Client)
	resourcetest.RunControllers(t, svc.Client, foo.BarController())

	// A Bar without qux is accepted and has nothing to resolve.
	plain := svc.Resource(foo.BarV1Type, "plain").
		WithData(t, &pbfoov1.Bar{Baz: "Plain"}).
		Write(t, svc.Client)
	client.WaitForStatusCondition(t, plain.Id, foo.StatusKey, accepted)
	got := client.WaitForStatusCondition(t, plain.Id, foo.StatusKey, noReference)
	assert.Contains(t, got.Metadata["finalizers"], foo.BarFinalizer)

	// A Bar naming a Zip that does not exist yet reports MissingReference...
	zip := svc.Resource(foo.ZipType, "zip").WithData(t, &pbfoov1.Zip{Zap: "zap"}).WithMeta(foo.ReferableKey, "true")
	waiting := svc.Resource(foo.BarV1Type, "waiting").
		WithData(t, &pbfoov1.Bar{Baz: "Waiting", Qux: zip.ID()}).
		Write(t, svc.Client)
	client.WaitForStatusCondition(t, waiting.Id, foo.StatusKey, missing(zipID, zipMissing))

	// ...until the Zip appears, and again once it is gone.
	written := zip.Write(t, svc.Client)
	client.WaitForStatusCondition(t, waiting.Id, foo.StatusKey, resolved(zipID))
	client.MustDelete(t, written.Id)
	client.WaitForStatusCondition(t, waiting.Id, foo.StatusKey, missing(zipID, zipMissing))
}

// The controller may read every Zip; the writer of a Bar may not. A Zip
// that does not let Bars see it is reported exactly as one that does not
// exist, so a Bar's status tells its writer nothing it could not read.
func TestBarControllerDoesNotRevealUnreferableZips(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	client := resourcetest.NewClient(svc.Client)
	resourcetest.RunControllers(t, svc.Client, foo.BarController())

	// The same condition, but for the name, whether the Zip exists or not.
	for _, name := range []string{"secret", "absent"} {
		if name == "secret" {
			svc.Resource(foo.ZipType, name).WithData(t, &pbfoov1.Zip{Zap: "hidden"}).Write(t, svc.Client)
		}
		ref := &pbresource.ID{Type: foo.ZipType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: name}
		bar := svc.Resource(foo.BarV1Type, "probe-"+name).WithData(t, &pbfoov1.Bar{Baz: name, Qux: ref}).Write(t, svc.Client)
		client.WaitForStatusCondition(t, bar.Id, foo.StatusKey, missing(ref, strings.Replace(zipMissing, `"zip"`, `"`+name+`"`, 1)))
	}

	// Once the Zip's writer makes it referable, the Bar resolves it.
	referable := svc.Resource(foo.ZipType, "secret").WithData(t, &pbfoov1.Zip{Zap: "hidden"}).
		WithMeta(foo.ReferableKey, "true").Write(t, svc.Client)
	bar := svc.Resource(foo.BarV1Type, "probe-secret").ID()
	client.WaitForStatusCondition(t, bar, foo.StatusKey, resolved(referable.Id))
}

func TestBarControllerSettlesAndReleasesDeletion(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	client := resourcetest.NewClient(svc.Client)
	counted := &writeCounter{ResourceServiceClient: svc.Client}
	mgr := resourcetest.RunControllers(t, counted, foo.BarController())

	bar := svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "bar"}).Write(t, svc.Client)
	settled := client.WaitForStatusCondition(t, bar.Id, foo.StatusKey, noReference)
	assert.Equal(t, int32(2), counted.writes.Load(), "one write for the finalizer, one for the status")
	// Reconciling after its own writes (each is an event) writes nothing.
	client.RequireSettled(t, 200*time.Millisecond, foo.BarV1Type)

	// Restarting the controller reconciles every Bar again; a settled
	// controller writes nothing. (The restart reconciles before a new
	// leader term can begin, so the version check below sees its effect.)
	mgr.SetLeader(false)
	mgr.SetLeader(true)
	other := svc.Resource(foo.BarV1Type, "other").WithData(t, &pbfoov1.Bar{Baz: "other"}).Write(t, svc.Client)
	client.WaitForStatusCondition(t, other.Id, foo.StatusKey, noReference)
	client.RequireVersionUnchanged(t, bar.Id, settled.Version)
	assert.Equal(t, int32(4), counted.writes.Load(), "only the new Bar was written to")

	// Deleting marks the Bar; the controller drops its finalizer and the
	// deletion completes.
	client.MustDelete(t, bar.Id)
	client.WaitForDeletion(t, bar.Id)
}

// writeCounter counts the writes a controller makes.
type writeCounter struct {
	pbresource.ResourceServiceClient
	writes atomic.Int32
}

func (c *writeCounter) Write(ctx context.Context, in *pbresource.WriteRequest, opts ...grpc.CallOption) (*pbresource.WriteResponse, error) {
	c.writes.Add(1)
	return c.ResourceServiceClient.Write(ctx, in, opts...)
}

func (c *writeCounter) WriteStatus(ctx context.Context, in *pbresource.WriteStatusRequest, opts ...grpc.CallOption) (*pbresource.WriteStatusResponse, error) {
	c.writes.Add(1)
	return c.ResourceServiceClient.WriteStatus(ctx, in, opts...)
}

// TestBarReconcile runs one Reconcile per case against a prepared cache: the
// table-test style for a reconciler's decisions.
func TestBarReconcile(t *testing.T) {
	quxID := &pbresource.ID{Type: foo.QuxType, Tenancy: &pbresource.Tenancy{}, Name: "q"}
	cases := map[string]struct {
		bar       *pbfoov1.Bar
		withZip   bool
		condition *pbresource.Condition
	}{
		"no reference":       {bar: &pbfoov1.Bar{Baz: "a"}, condition: noReference},
		"existing zip":       {bar: &pbfoov1.Bar{Baz: "a", Qux: zipID}, withZip: true, condition: resolved(zipID)},
		"missing zip":        {bar: &pbfoov1.Bar{Baz: "a", Qux: zipID}, condition: missing(zipID, zipMissing)},
		"reference to a qux": {bar: &pbfoov1.Bar{Baz: "a", Qux: quxID}, condition: missing(&pbresource.ID{Type: foo.QuxType, Tenancy: &pbresource.Tenancy{Partition: "default"}, Name: "q"}, "qux must name a foo.v1.Zip, not a foo.v1.Qux")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
			h := resourcetest.NewControllerHarness(t, svc.Client, foo.BarController())
			if tc.withZip {
				h.Write(t, svc.Resource(foo.ZipType, "zip").WithData(t, &pbfoov1.Zip{}).WithMeta(foo.ReferableKey, "true"))
			}
			bar := h.Write(t, svc.Resource(foo.BarV1Type, "bar").
				WithData(t, tc.bar).
				WithMeta("finalizers", foo.BarFinalizer))

			require.NoError(t, h.Reconcile(t, bar.Id))
			h.Client.RequireStatusConditionForCurrentGen(t, bar.Id, foo.StatusKey, accepted)
			h.Client.RequireStatusConditionForCurrentGen(t, bar.Id, foo.StatusKey, tc.condition)
		})
	}
}

// TestBarReconcileReadsV2 checks that a Bar stored as a foo.v2.Bar, which
// the typed read as a foo.v1.Bar refuses, is reconciled all the same.
func TestBarReconcileReadsV2(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	h := resourcetest.NewControllerHarness(t, svc.Client, foo.BarController())
	bar := h.Write(t, svc.Resource(foo.BarV2Type, "bar").
		WithData(t, &pbfoov2.Bar{Baz: "two"}).
		WithMeta("finalizers", foo.BarFinalizer))

	require.NoError(t, h.Reconcile(t, bar.Id))
	h.Client.RequireStatusConditionForCurrentGen(t, bar.Id, foo.StatusKey, accepted)
	h.Client.RequireStatusConditionForCurrentGen(t, bar.Id, foo.StatusKey, noReference)
}

// TestZipChangesMapToReferringBars checks the controller's dependency mapper
// through its cache index.
func TestZipChangesMapToReferringBars(t *testing.T) {
	svc := resourcetest.StartService(t, resourcetest.WithTypes(foo.RegisterTypes))
	h := resourcetest.NewControllerHarness(t, svc.Client, foo.BarController())
	zip := svc.Resource(foo.ZipType, "zip").WithData(t, &pbfoov1.Zip{})
	h.Write(t, svc.Resource(foo.BarV1Type, "refers").WithData(t, &pbfoov1.Bar{Baz: "a", Qux: zip.ID()}))
	h.Write(t, svc.Resource(foo.BarV1Type, "unrelated").WithData(t, &pbfoov1.Bar{Baz: "b"}))

	reqs, err := h.Map(t, zip.Write(t, svc.Client))
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	assert.Equal(t, "refers", reqs[0].ID.Name)
}
