package robustness

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/loomrt/loom/examples/foo"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
	"github.com/loomrt/loom/storage/inmem"
)

// TestInMemory runs the seeded workload against the service over the
// in-memory backend, called in process and over gRPC, with a small watch
// buffer so that the slow watcher is sometimes ended for falling behind.
func TestInMemory(t *testing.T) {
	for _, seed := range Seeds() {
		t.Run(fmt.Sprintf("in-process/%d", seed), func(t *testing.T) {
			Verify(t, NewService(t, inmem.New(inmem.WithWatchBufferSize(16))), ConfigFor(seed))
		})
		t.Run(fmt.Sprintf("grpc/%d", seed), func(t *testing.T) {
			Verify(t, NewGRPCService(t, inmem.New(inmem.WithWatchBufferSize(16))), ConfigFor(seed))
		})
	}
}

// TestZip runs the workload on foo.v1.Zip, a partition-scoped type, as the
// cluster test does (its servers run the Bar controller).
func TestZip(t *testing.T) {
	cfg := ConfigFor(Seeds()[0])
	cfg.Type = foo.ZipType
	Verify(t, NewService(t, inmem.New(inmem.WithWatchBufferSize(16))), cfg)
}

// brokenCAS is a backend whose WriteCAS ignores the version it is given:
// it writes over whatever is stored (the mutation of TestCheckerCatchesBrokenCAS).
type brokenCAS struct{ storage.Backend }

func (b brokenCAS) WriteCAS(ctx context.Context, res *pbresource.Resource) (*pbresource.Resource, error) {
	// Widen the window between the service's read and this write, so that
	// the lost compare matters within a short run.
	runtime.Gosched()
	stored, err := b.Read(ctx, storage.StrongConsistency, res.Id)
	w := resource.Clone(res)
	w.Version = ""
	if err == nil {
		w.Version = stored.Version
	} else if mismatch, ok := err.(storage.GroupVersionMismatchError); ok {
		w.Version = mismatch.Stored.Version
	}
	return b.Backend.WriteCAS(ctx, w)
}

// TestCheckerCatchesBrokenCAS shows that the checks fail when the backend's
// compare-and-swap on Write is removed: concurrent writes to few names
// then lose updates.
func TestCheckerCatchesBrokenCAS(t *testing.T) {
	for _, seed := range Seeds() {
		cfg := Config{Seed: seed, Clients: 6, Ops: 150, Names: 2, Watchers: 1}
		problems := RunChecked(t, NewService(t, brokenCAS{inmem.New()}), cfg)
		if len(problems) == 0 {
			t.Fatalf("seed %d: the checks passed over a backend without CAS", seed)
		}
		t.Logf("seed %d: found, as it should:\n%s", seed, problems[0])
	}
}

// droppingWatch is a backend whose watches drop the third change after
// their snapshot (the mutation of TestValidatorCatchesDroppedEvent).
type droppingWatch struct{ storage.Backend }

func (b droppingWatch) WatchList(ctx context.Context, t storage.UnversionedType, ten *pbresource.Tenancy, prefix string) (storage.Watch, error) {
	w, err := b.Backend.WatchList(ctx, t, ten, prefix)
	if err != nil {
		return nil, err
	}
	return &dropThird{Watch: w}, nil
}

type dropThird struct {
	storage.Watch
	snapshotDone bool
	changes      atomic.Int32
}

func (w *dropThird) Next(ctx context.Context) (*pbresource.WatchEvent, error) {
	for {
		ev, err := w.Watch.Next(ctx)
		if err != nil {
			return nil, err
		}
		if ev.GetEndOfSnapshot() != nil {
			w.snapshotDone = true
			return ev, nil
		}
		if w.snapshotDone && ev.GetUpsert() != nil && w.changes.Add(1) == 3 {
			continue // dropped
		}
		return ev, nil
	}
}

// TestValidatorCatchesDroppedEvent shows that the watch validator fails
// when a watch loses one change.
func TestValidatorCatchesDroppedEvent(t *testing.T) {
	for _, seed := range Seeds() {
		cfg := Config{Seed: seed, Clients: 4, Ops: 100, Names: 3, Watchers: 2}
		problems := RunChecked(t, NewService(t, droppingWatch{inmem.New()}), cfg)
		if len(problems) == 0 {
			t.Fatalf("seed %d: the checks passed though every watch dropped an event", seed)
		}
		t.Logf("seed %d: found, as it should:\n%s", seed, problems[0])
	}
}

// skippingResume is a client whose resumed watches start one version late,
// as a server that resumed from the wrong place would: each resume loses the
// change right after the resume point.
type skippingResume struct {
	pbresource.ResourceServiceClient
}

func (c skippingResume) WatchList(ctx context.Context, in *pbresource.WatchListRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[pbresource.WatchEvent], error) {
	if n, err := strconv.ParseUint(in.SinceVersion, 10, 64); err == nil {
		in = proto.Clone(in).(*pbresource.WatchListRequest)
		in.SinceVersion = strconv.FormatUint(n+1, 10)
	}
	return c.ResourceServiceClient.WatchList(ctx, in, opts...)
}

// TestValidatorCatchesBadResume shows that the watch validator checks a
// resumed stream as one unbroken stream: resuming one version late fails.
func TestValidatorCatchesBadResume(t *testing.T) {
	caught := 0
	// Fixed seeds, enough operations that watches are broken and resumed
	// (each breaks after fewer than 300 events). No slow watcher: a stream
	// ended for falling behind may start afresh, which skips nothing.
	for seed := uint64(1); seed <= 4; seed++ {
		cfg := Config{Seed: seed, Clients: 4, Ops: 400, Names: 3, Watchers: 2}
		if problems := RunChecked(t, skippingResume{NewService(t, inmem.New())}, cfg); len(problems) > 0 {
			caught++
			t.Logf("seed %d: found, as it should:\n%s", seed, problems[0])
		}
	}
	if caught == 0 {
		t.Fatal("the checks passed on seeds 1-4 though every resumed watch skipped a change")
	}
}

// lossy is a backend that loses the response of some writes: it applies
// one in every `every` WriteCAS, DeleteCAS and Read calls and then reports
// storage.ErrInconsistent (the service answers Unavailable), as a server
// cut off from etcd after its write committed would.
type lossy struct {
	storage.Backend
	every int64
	calls atomic.Int64
}

func (b *lossy) lose() bool { return b.calls.Add(1)%b.every == 0 }

func (b *lossy) WriteCAS(ctx context.Context, res *pbresource.Resource) (*pbresource.Resource, error) {
	out, err := b.Backend.WriteCAS(ctx, res)
	if err == nil && b.lose() {
		return nil, storage.ErrInconsistent
	}
	return out, err
}

func (b *lossy) DeleteCAS(ctx context.Context, id *pbresource.ID, version string, opts ...storage.DeleteOption) error {
	err := b.Backend.DeleteCAS(ctx, id, version, opts...)
	if err == nil && b.lose() {
		return storage.ErrInconsistent
	}
	return err
}

// Read fails one in every `every` reads with storage.ErrInconsistent (the
// service answers Unavailable), as a server cut off from etcd would.
func (b *lossy) Read(ctx context.Context, c storage.ReadConsistency, id *pbresource.ID) (*pbresource.Resource, error) {
	if b.lose() {
		return nil, storage.ErrInconsistent
	}
	return b.Backend.Read(ctx, c, id)
}

// TestLostResponses checks the hook the multi-process run needs: writes
// whose outcome is unknown (Config.Indeterminate) are checked as having
// happened or not, reads that failed so as having returned nothing, and the checks still pass on a correct service that
// loses responses, while the same run without the hook reports the errors.
func TestLostResponses(t *testing.T) {
	for _, seed := range Seeds() {
		cfg := ShortConfig(seed)
		cfg.Indeterminate = func(c codes.Code) bool { return c == codes.Unavailable }
		Verify(t, NewService(t, &lossy{Backend: inmem.New(), every: 20}), cfg)

		cfg.Indeterminate = nil
		problems := RunChecked(t, NewService(t, &lossy{Backend: inmem.New(), every: 20}), cfg)
		if !strings.Contains(strings.Join(problems, "\n"), "Unavailable") {
			t.Fatalf("seed %d: lost responses not reported without Config.Indeterminate: %v", seed, problems)
		}
	}
}

// TestSeveralServers checks the hook for runs across servers
// (Config.Connect): two services over one backend, the clients and
// watchers spread over both.
func TestSeveralServers(t *testing.T) {
	for _, seed := range Seeds() {
		b := inmem.New()
		servers := []pbresource.ResourceServiceClient{NewService(t, b), NewGRPCService(t, b)}
		cfg := ShortConfig(seed)
		cfg.Connect = func(i int) (pbresource.ResourceServiceClient, int) { return servers[i%2], i % 2 }
		Verify(t, nil, cfg)
	}
}
