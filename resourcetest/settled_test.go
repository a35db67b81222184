package resourcetest_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/loomrt/loom/controller"
	"github.com/loomrt/loom/examples/foo"
	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/reconcile"
	"github.com/loomrt/loom/resourcetest"
)

func TestRequireSettledPassesOnASettledController(t *testing.T) {
	svc := startService(t)
	client := resourcetest.NewClient(svc.Client)
	resourcetest.RunControllers(t, client, barController())
	bar := svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, client)
	client.WaitForStatusCondition(t, bar.Id, acceptedKey, accepted("NoZip"))

	const window = 150 * time.Millisecond
	start := time.Now()
	f := runFake(func(ft *fakeT) { client.RequireSettled(ft, window, foo.BarV1Type, foo.ZipType) })
	requirePassed(t, f)
	require.GreaterOrEqual(t, time.Since(start), window, "the whole window was observed")
}

// tickerController rewrites the Zip "ticker" every 10 ms for as long as
// the Bar it manages exists: a controller that never settles.
func tickerController() *controller.Controller {
	var n atomic.Int64
	return controller.NewController("ticker", foo.BarV1Type).
		WithReconciler(reconcile.ReconcileFunc(func(ctx context.Context, rt reconcile.Runtime, req reconcile.Request) error {
			data, err := anypb.New(&pbfoov1.Zip{Zap: strconv.FormatInt(n.Add(1), 10)})
			if err != nil {
				return err
			}
			zip := resourcetest.Resource(foo.ZipType, "ticker").Build()
			zip.Data = data
			if _, err := rt.Client.Write(ctx, &pbresource.WriteRequest{Resource: zip}); err != nil {
				return err
			}
			return reconcile.RequeueAfter(10 * time.Millisecond)
		}))
}

func TestRequireSettledFailsOnAControllerThatKeepsWriting(t *testing.T) {
	svc := startService(t)
	client := resourcetest.NewClient(svc.Client)
	resourcetest.RunControllers(t, client, tickerController())
	svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, client)
	client.WaitForResourceExists(t, svc.Resource(foo.ZipType, "ticker").ID())

	start := time.Now()
	f := runFake(func(ft *fakeT) { client.RequireSettled(ft, 5*time.Second, foo.BarV1Type, foo.ZipType) })
	requireFailed(t, f, true, "RequireSettled foo.v1.Bar, foo.v1.Zip",
		"expected: no write for 5s after the watches' snapshots",
		"foo.v1.Zip/default./ticker@", "was written (upsert, version", "into the window",
		"observed resource:", `"zap"`)
	require.Less(t, time.Since(start), 4*time.Second, "it fails at the first write, not at the end of the window")

	// Only the given types are watched: the Bars themselves are quiet.
	f = runFake(func(ft *fakeT) { client.RequireSettled(ft, 100*time.Millisecond, foo.BarV1Type) })
	requirePassed(t, f)
}

func TestRequireSettledFailsOnADelete(t *testing.T) {
	svc := startService(t)
	// The snapshots may take a while on a loaded machine; the failure
	// comes at the first delete either way.
	client := resourcetest.NewClient(svc.Client).WithTimeout(10 * time.Second)
	for i := 0; i < 100; i++ {
		svc.Resource(foo.ZipType, fmt.Sprintf("zip-%03d", i)).WithData(t, &pbfoov1.Zip{Zap: "z"}).Write(t, svc.Client)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i < 100; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := svc.Client.Delete(context.Background(), &pbresource.DeleteRequest{Id: svc.Resource(foo.ZipType, fmt.Sprintf("zip-%03d", i)).ID()}); err != nil {
				t.Errorf("deleting: %v", err)
				return
			}
		}
	}()
	f := runFake(func(ft *fakeT) { client.RequireSettled(ft, 5*time.Second, foo.ZipType) })
	close(stop)
	<-done
	requireFailed(t, f, true, "RequireSettled foo.v1.Zip", "foo.v1.Zip/default./zip-", "was deleted", "into the window")
}

func TestRequireSettledReportsWatchErrors(t *testing.T) {
	_, client := setup(t)
	f := runFake(func(ft *fakeT) {
		client.RequireSettled(ft, time.Second, &pbresource.Type{Group: "no", GroupVersion: "v1", Kind: "Such"})
	})
	requireFailed(t, f, true, "RequireSettled no.v1.Such", "watching no.v1.Such failed", "InvalidArgument")

	f = runFake(func(ft *fakeT) { client.RequireSettled(ft, time.Second) })
	requireFailed(t, f, true, "no type to watch was given")
}

func TestRequireSettledOverGRPC(t *testing.T) {
	svc := startService(t, resourcetest.OverGRPC())
	client := resourcetest.NewClient(svc.Client)
	resourcetest.RunControllers(t, client, tickerController())
	svc.Resource(foo.BarV1Type, "bar").WithData(t, &pbfoov1.Bar{Baz: "x"}).Write(t, client)
	client.WaitForResourceExists(t, svc.Resource(foo.ZipType, "ticker").ID())

	f := runFake(func(ft *fakeT) { client.RequireSettled(ft, 5*time.Second, foo.ZipType) })
	requireFailed(t, f, true, "foo.v1.Zip/default./ticker@", "was written (upsert")
	f = runFake(func(ft *fakeT) { client.RequireSettled(ft, 50*time.Millisecond, foo.BarV1Type) })
	requirePassed(t, f)
}
