package server

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"

	pbfoov1 "github.com/loomrt/loom/examples/foo/pbfoo/v1"
	"github.com/loomrt/loom/proto/pbresource"
	"github.com/loomrt/loom/resource"
	"github.com/loomrt/loom/storage"
)

// bigStatus is a valid status of about size bytes (in a condition's
// message).
func bigStatus(gen string, size int) *pbresource.Status {
	st := simpleStatus(gen)
	st.Conditions[0].Message = strings.Repeat("m", size)
	return st
}

// zipOf is a Zip whose data is about size bytes.
func zipOf(t testing.TB, name string, size int) *pbresource.Resource {
	return &pbresource.Resource{Id: zipID(name), Data: mustAny(t, &pbfoov1.Zip{Zap: strings.Repeat("z", size)})}
}

func TestFinalizers_MaximumThenDelete(t *testing.T) {
	env := newEnv(t)
	// The most finalizers, each of the longest name.
	names := strings.Fields(finalizerNames(MaxFinalizers, MaxFinalizerNameLength))
	res := bar(t, "held", "x")
	res.Metadata = map[string]string{resource.FinalizerKey: strings.Join(names, " ")}
	stored := env.write(t, res)
	require.Equal(t, names, resource.Finalizers(stored))

	// One more is refused, naming the field.
	more := proto.Clone(stored).(*pbresource.Resource)
	more.Metadata[resource.FinalizerKey] += " one-more"
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: more})
	requireCode(t, err, codes.InvalidArgument, `"metadata.finalizers"`, "129 finalizers", "limit is 128")

	require.NoError(t, env.delete(t, stored.Id, ""))
	marked := env.mustRead(t, stored.Id)
	require.True(t, resource.IsMarkedForDeletion(marked))

	// Each finalizer's controller removes its own, in any order.
	for i := len(names) - 1; i >= 0; i-- {
		next := proto.Clone(marked).(*pbresource.Resource)
		next.Metadata[resource.FinalizerKey] = strings.Join(names[:i], " ")
		out, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: next})
		require.NoError(t, err, "removing finalizer %d", i)
		marked = out.Resource
	}
	_, err = env.read(t, stored.Id)
	requireCode(t, err, codes.NotFound)
}

func TestFinalizers_OverALoweredLimitCanStillBeRemoved(t *testing.T) {
	env := newEnv(t)
	liftLimits(env.server)
	names := strings.Fields(finalizerNames(3*MaxFinalizers, 8))
	res := bar(t, "old", "x")
	res.Metadata = map[string]string{resource.FinalizerKey: strings.Join(names, " ")}
	stored := env.write(t, res)
	env.server.limits = newLimits(0, 0) // the limits come (back) into force

	// Adding is refused; removing is accepted although still over the limit.
	add := proto.Clone(stored).(*pbresource.Resource)
	add.Metadata[resource.FinalizerKey] = strings.Join(names[1:], " ") + " new"
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: add})
	requireCode(t, err, codes.InvalidArgument, `"metadata.finalizers"`)
	// So is repeating stored names to grow the list.
	repeat := proto.Clone(stored).(*pbresource.Resource)
	repeat.Metadata[resource.FinalizerKey] = strings.Join(names, " ") + " " + names[1]
	_, err = env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: repeat})
	requireCode(t, err, codes.InvalidArgument, `"metadata.finalizers"`)
	remove := proto.Clone(stored).(*pbresource.Resource)
	remove.Metadata[resource.FinalizerKey] = strings.Join(names[1:], " ")
	stored = env.write(t, remove)

	// Marked, it goes once the last finalizer is removed.
	require.NoError(t, env.delete(t, stored.Id, ""))
	marked := env.mustRead(t, stored.Id)
	marked.Metadata[resource.FinalizerKey] = ""
	env.write(t, marked)
	_, err = env.read(t, stored.Id)
	requireCode(t, err, codes.NotFound)
}

func TestMetadata_Limits(t *testing.T) {
	env := newEnv(t)
	res := bar(t, "m", "x")
	res.Metadata = map[string]string{}
	for i := range MaxMetadataKeys {
		res.Metadata[fmt.Sprint("k", i)] = strings.Repeat("v", 100)
	}
	res.Metadata[strings.Repeat("k", MaxMetadataKeyLength)] = strings.Repeat("v", MaxMetadataValueLength)
	delete(res.Metadata, "k0")
	stored := env.write(t, res) // at every limit

	more := proto.Clone(stored).(*pbresource.Resource)
	more.Metadata["k0"] = "v"
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: more})
	requireCode(t, err, codes.InvalidArgument, `"metadata"`, "65 keys", "limit is 64")

	long := proto.Clone(stored).(*pbresource.Resource)
	long.Metadata["k1"] = strings.Repeat("v", MaxMetadataValueLength+1)
	_, err = env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: long})
	requireCode(t, err, codes.InvalidArgument, `"metadata"`, `key "k1"`, "65537 bytes")

	// Metadata stored before a limit was lowered is kept by other writes.
	env.server.limits.metadataKeys = 10
	env.server.limits.metadataValue = 100
	same := proto.Clone(stored).(*pbresource.Resource)
	same.Version = ""
	same.Data = mustAny(t, &pbfoov1.Bar{Baz: "changed"})
	env.write(t, same)
	fewer := proto.Clone(stored).(*pbresource.Resource)
	fewer.Version = ""
	delete(fewer.Metadata, "k1")
	env.write(t, fewer)
}

func TestWriteStatus_OversizedStatusRefused(t *testing.T) {
	env := newEnv(t)
	res := env.write(t, zip(t, "z"))
	gen := res.Generation

	// One status over the limit by itself.
	_, err := env.client.WriteStatus(testCtx(t), &pbresource.WriteStatusRequest{
		Id: res.Id, Key: "big", Status: bigStatus(gen, 2<<20),
	})
	requireCode(t, err, codes.InvalidArgument, `"status"`, "the resource would be 2 MiB", "over the limit of 1 MiB (server.Config.MaxResourceBytes)")

	// Two statuses each under the limit, together over it.
	env.writeStatus(t, res.Id, "first", bigStatus(gen, 600<<10))
	_, err = env.client.WriteStatus(testCtx(t), &pbresource.WriteStatusRequest{
		Id: res.Id, Key: "second", Status: bigStatus(gen, 600<<10),
	})
	requireCode(t, err, codes.InvalidArgument, `"status"`, "over the limit of 1 MiB")

	got := env.mustRead(t, res.Id)
	require.Contains(t, got.Status, "first")
	require.NotContains(t, got.Status, "second")
	require.LessOrEqual(t, proto.Size(got), DefaultMaxResourceBytes)
}

func TestWrite_OversizedNamesTheBiggerField(t *testing.T) {
	env := newEnv(t)
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: zipOf(t, "z", 1<<20)})
	requireCode(t, err, codes.InvalidArgument, `invalid "data" field`, "data 1 MiB", "over the limit of 1 MiB")

	res := zipOf(t, "z", 10)
	res.Metadata = map[string]string{}
	for i := range 20 {
		res.Metadata[fmt.Sprint("k", i)] = strings.Repeat("v", 60<<10)
	}
	_, err = env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: res})
	requireCode(t, err, codes.InvalidArgument, `invalid "metadata" field`, "metadata 1.2 MiB")

	// Data that fits alone but not with the stored status.
	stored := env.write(t, zipOf(t, "s", 10))
	env.writeStatus(t, stored.Id, "k", bigStatus(stored.Generation, 700<<10))
	_, err = env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: zipOf(t, "s", 500<<10)})
	requireCode(t, err, codes.InvalidArgument, `invalid "data" field`, "status 700")
}

// TestOversizedWritesLeaveTheTypeListable is the "poison pill" of issue 8:
// after someone tried to store an oversized resource through Write and
// WriteStatus, a default gRPC client still lists and watches the type.
func TestOversizedWritesLeaveTheTypeListable(t *testing.T) {
	env := newEnv(t)
	client := grpcClient(t, env) // default message limits: 4 MiB
	ctx := testCtx(t)
	ok := env.write(t, zipOf(t, "ok", 880<<10)) // with room for a 100 KiB status and the finalizers
	_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: zipOf(t, "huge", 3<<20)})
	requireCode(t, err, codes.InvalidArgument, `"data"`)
	_, err = client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: ok.Id, Key: "a", Status: bigStatus(ok.Generation, 3<<20)})
	requireCode(t, err, codes.InvalidArgument, `"status"`)
	for _, key := range []string{"a", "b", "c"} {
		_, err = client.WriteStatus(ctx, &pbresource.WriteStatusRequest{Id: ok.Id, Key: key, Status: bigStatus(ok.Generation, 100<<10)})
		if key == "a" {
			require.NoError(t, err)
		} else {
			requireCode(t, err, codes.InvalidArgument, `"status"`)
		}
	}
	for i := range 3 {
		env.write(t, zipOf(t, fmt.Sprint("more-", i), 900<<10))
	}

	list, err := client.List(ctx, &pbresource.ListRequest{Type: zipID("x").Type, Tenancy: &pbresource.Tenancy{Partition: "*"}})
	require.NoError(t, err)
	require.Len(t, list.Resources, 4)
	stream := startWatch(t, client, &pbresource.WatchListRequest{Type: zipID("x").Type, Tenancy: &pbresource.Tenancy{Partition: "*"}})
	require.ElementsMatch(t, []string{"ok", "more-0", "more-1", "more-2"}, requireSnapshot(t, stream, 4))
	_, err = client.Read(ctx, &pbresource.ReadRequest{Id: ok.Id})
	require.NoError(t, err)
}

func TestMaxResourceBytes_Setting(t *testing.T) {
	b := newEnv(t).backend
	reg := newEnv(t).registry
	s := New(Config{Backend: b, Registry: reg, MaxResourceBytes: 4 << 10})
	client := NewInProcessClient(s)
	ctx := testCtx(t)
	_, err := client.Write(ctx, &pbresource.WriteRequest{Resource: zipOf(t, "small", 3<<10)})
	require.NoError(t, err)
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: zipOf(t, "big", 5<<10)})
	requireCode(t, err, codes.InvalidArgument, `"data"`, "over the limit of 4 KiB")

	// The zero value is the default: 1 MiB.
	def := New(Config{Backend: b, Registry: reg})
	require.Equal(t, DefaultMaxResourceBytes, def.limits.resourceBytes)
	_, err = NewInProcessClient(def).Write(ctx, &pbresource.WriteRequest{Resource: zipOf(t, "big", 980<<10)})
	require.NoError(t, err)

	// The same resource is too big for the 4 KiB server, which still lets
	// it be written smaller, but not bigger, and deleted.
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: zipOf(t, "big", 981<<10)})
	requireCode(t, err, codes.InvalidArgument, `"data"`)
	_, err = client.Write(ctx, &pbresource.WriteRequest{Resource: zipOf(t, "big", 979<<10)})
	require.NoError(t, err)
	_, err = client.Delete(ctx, &pbresource.DeleteRequest{Id: zipID("big")})
	require.NoError(t, err)

	require.Panics(t, func() { New(Config{Backend: b, MaxResourceBytes: -1}) })
}

// TestSizeLimit_AcceptedResourcesCanBeMarked checks the room kept for the
// deletion mark: a resource with finalizers written right up to the limit
// can still be deleted (marked).
func TestSizeLimit_AcceptedResourcesCanBeMarked(t *testing.T) {
	env := newEnv(t)
	env.server.limits.resourceBytes = 2000
	fill := func(n int) *pbresource.Resource {
		r := zipOf(t, "edge", n)
		r.Metadata = map[string]string{resource.FinalizerKey: "keep"}
		return r
	}
	// Find the biggest data the limit lets through.
	n := 0
	for size := 1024; size > 0; size /= 2 {
		if _, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: fill(n + size)}); err == nil {
			n += size
		}
	}
	res := env.write(t, fill(n))
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: fill(n + 1)})
	requireCode(t, err, codes.InvalidArgument, `"data"`)

	require.NoError(t, env.delete(t, res.Id, ""))
	marked := env.mustRead(t, res.Id)
	require.True(t, resource.IsMarkedForDeletion(marked))
	require.LessOrEqual(t, proto.Size(marked), 2000)
}

func TestWriteStatus_KeyLimit(t *testing.T) {
	env := newEnv(t)
	res := env.write(t, zip(t, "z"))
	for i := range MaxStatusKeys {
		env.writeStatus(t, res.Id, fmt.Sprint("controller-", i), simpleStatus(res.Generation))
	}
	_, err := env.client.WriteStatus(testCtx(t), &pbresource.WriteStatusRequest{
		Id: res.Id, Key: "one-too-many", Status: simpleStatus(res.Generation),
	})
	requireCode(t, err, codes.InvalidArgument, `"key"`, "limit is 32")
	// Existing keys can still be written.
	env.writeStatus(t, res.Id, "controller-0", simpleStatus(res.Generation))
}

func TestResourceSize(t *testing.T) {
	full := bar(t, "a", "x")
	full.Id.Uid = resource.NewULID()
	full.Owner = withFreshUid(zipID("o"))
	full.Version = "12345"
	full.Generation = resource.NewULID()
	full.Metadata = map[string]string{"k": "v", "": "", "empty": "", resource.FinalizerKey: "a b"}
	full.Status = map[string]*pbresource.Status{"s": bigStatus(full.Generation, 300), "": {}, "t": simpleStatus(full.Generation)}
	withUnknown := proto.Clone(full).(*pbresource.Resource)
	withUnknown.ProtoReflect().SetUnknown([]byte{0xfa, 0x01, 0x03, 'a', 'b', 'c'}) // field 31, "abc"
	for name, res := range map[string]*pbresource.Resource{
		"empty":          {},
		"bar":            bar(t, "a", "x"),
		"full":           full,
		"unknown fields": withUnknown,
		"big status":     {Status: map[string]*pbresource.Status{"k": bigStatus(resource.NewULID(), 1<<20)}},
	} {
		require.Equal(t, proto.Size(res), resourceSize(res), name)
	}
}

// TestResourceSizeEveryField checks the hand-written sizes against
// proto.Size with every field of every message set (by reflection, so a
// field added to resource.proto is covered), unknown fields in every
// message, and the edge cases of varints and nil messages.
func TestResourceSizeEveryField(t *testing.T) {
	full := &pbresource.Resource{}
	fill(full.ProtoReflect(), 3, 0)
	withUnknown := proto.Clone(full).(*pbresource.Resource)
	setUnknown(withUnknown.ProtoReflect())

	negative := proto.Clone(full).(*pbresource.Resource)
	for _, st := range negative.Status {
		st.UpdatedAt.Seconds, st.UpdatedAt.Nanos = -1, -5
		st.Conditions[0].State = -1
		st.Conditions = append(st.Conditions, nil, &pbresource.Condition{Resource: &pbresource.Reference{}})
	}
	negative.Status["nil"] = nil
	negative.Status["empty"] = &pbresource.Status{UpdatedAt: &timestamppb.Timestamp{}}
	negative.Data = &anypb.Any{}
	negative.Owner = &pbresource.ID{}

	for name, res := range map[string]*pbresource.Resource{
		"every field":    full,
		"unknown fields": withUnknown,
		"edge cases":     negative,
	} {
		require.Equal(t, proto.Size(res), resourceSize(res), name)
	}
}

// setUnknown gives m and every message in it an unknown field.
func setUnknown(m protoreflect.Message) {
	m.SetUnknown([]byte{0xfa, 0x01, 0x03, 'a', 'b', 'c'}) // field 31, "abc"
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					setUnknown(mv.Message())
					return true
				})
			}
		case fd.IsList():
			if fd.Message() != nil {
				for i := range v.List().Len() {
					setUnknown(v.List().Get(i).Message())
				}
			}
		case fd.Message() != nil:
			setUnknown(v.Message())
		}
		return true
	})
}

// tooLargeBackend refuses every write as too large, as etcd does past its
// --max-request-bytes.
type tooLargeBackend struct{ storage.Backend }

func (tooLargeBackend) WriteCAS(context.Context, *pbresource.Resource) (*pbresource.Resource, error) {
	return nil, fmt.Errorf("%w: etcd: etcdserver: request is too large", storage.ErrTooLarge)
}

func TestBackendTooLarge_IsInvalidArgument(t *testing.T) {
	env := newEnv(t)
	stored := env.write(t, zip(t, "z"))
	refusing := New(Config{Backend: tooLargeBackend{env.backend}, Registry: env.registry})
	client := NewInProcessClient(refusing)
	_, err := client.Write(testCtx(t), &pbresource.WriteRequest{Resource: zip(t, "new")})
	requireCode(t, err, codes.InvalidArgument, `"data"`, "more than the storage backend accepts")
	_, err = client.WriteStatus(testCtx(t), &pbresource.WriteStatusRequest{Id: stored.Id, Key: "k", Status: simpleStatus(stored.Generation)})
	requireCode(t, err, codes.InvalidArgument, `"status"`, "more than the storage backend accepts")
	requireCode(t, storageError(fmt.Errorf("x: %w", storage.ErrTooLarge)), codes.InvalidArgument, "too large")
}

// BenchmarkWriteStatusKeys measures WriteStatus on a resource that already
// has keys statuses (writing one of them), from 1 key up to the limit and
// past it (the limit lifted): the cost of copying and sizing the status map,
// and of the backend's copy. "server" calls the Server directly, "grpc" goes
// through a loopback gRPC connection. Run with
//
//	go test -run '^$' -bench BenchmarkWriteStatusKeys -benchmem ./server/
func BenchmarkWriteStatusKeys(b *testing.B) {
	for _, transport := range []string{"server", "grpc"} {
		for _, keys := range []int{1, 8, MaxStatusKeys, 64} {
			b.Run(fmt.Sprintf("%s/keys=%d", transport, keys), func(b *testing.B) {
				env := newEnv(b)
				env.server.limits.statusKeys = keys
				write := env.server.WriteStatus
				if transport == "grpc" {
					client, stop := serveLoopback(b, env)
					defer stop()
					write = func(ctx context.Context, req *pbresource.WriteStatusRequest) (*pbresource.WriteStatusResponse, error) {
						return client.WriteStatus(ctx, req)
					}
				}
				ctx := context.Background()
				res := env.write(b, zip(b, "z"))
				for i := range keys {
					env.writeStatus(b, res.Id, fmt.Sprint("controller-", i), simpleStatus(res.Generation))
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					if _, err := write(ctx, &pbresource.WriteStatusRequest{
						Id: res.Id, Key: "controller-0", Status: simpleStatus(res.Generation),
					}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkResourceSize sizes a resource shaped like W1's after its status
// write, as the size limit does on every write.
func BenchmarkResourceSize(b *testing.B) {
	res := bar(b, "a", "x")
	res.Id.Uid = resource.NewULID()
	res.Version = "12345"
	res.Generation = resource.NewULID()
	res.Status = map[string]*pbresource.Status{"bench.widget": simpleStatus(res.Generation)}
	res.Status["bench.widget"].UpdatedAt = timestamppb.Now()
	b.Run("resourceSize", func(b *testing.B) {
		for b.Loop() {
			_ = resourceSize(res)
		}
	})
	b.Run("proto.Size", func(b *testing.B) {
		for b.Loop() {
			_ = proto.Size(res)
		}
	})
}

// TestStatusWriteSize checks the size a status write is checked at, which
// is computed from the stored resource and the one changed entry, against
// the size of the resource the write stores.
func TestStatusWriteSize(t *testing.T) {
	stored := bar(t, "s", "x")
	stored.Id.Uid, stored.Generation, stored.Version = resource.NewULID(), resource.NewULID(), "42"
	for name, statuses := range map[string]map[string]*pbresource.Status{
		"none":  nil,
		"other": {"other": simpleStatus("g")},
		"same":  {"k": bigStatus("g", 300), "other": simpleStatus("g")},
		"nil":   {"k": nil},
	} {
		for _, st := range []*pbresource.Status{simpleStatus(stored.Generation), bigStatus("g", 1000), {}} {
			stored.Status = statuses
			n, old := statusWriteSize(stored, "k", st)
			require.Equal(t, storedSize(storage.WithStatus(stored, "k", st)), n, name)
			require.Equal(t, storedSize(stored), old, name)
		}
	}
}

// biggestZip writes the Zip with the biggest data the size limit lets
// through, with metadata meta, and returns it.
func biggestZip(t *testing.T, env *testEnv, name string, meta map[string]string) *pbresource.Resource {
	t.Helper()
	fill := func(n int) *pbresource.Resource {
		r := zipOf(t, name, n)
		r.Metadata = meta
		return r
	}
	n := 0
	for size := 1 << 20; size > 0; size /= 2 {
		if _, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: fill(n + size)}); err == nil {
			n += size
		}
	}
	res := env.write(t, fill(n))
	_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: fill(n + 1)})
	requireCode(t, err, codes.InvalidArgument, `"data"`)
	return res
}

// TestSizeLimit_AcceptedResourcesCanGetFinalizers checks the room kept for
// finalizers: whatever a Write stored, controllers (in process or not) can
// still add their finalizers to it, as many and as long as the finalizer
// limits allow, and it can then be marked; past those limits the error
// names metadata.finalizers, not the size. Also when the resource has
// every metadata key it may have.
func TestSizeLimit_AcceptedResourcesCanGetFinalizers(t *testing.T) {
	for _, limit := range []int{DefaultMaxResourceBytes, 4 << 10} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			env := newEnv(t)
			env.server.limits.resourceBytes = limit
			meta := map[string]string{}
			for i := range MaxMetadataKeys {
				meta[fmt.Sprint("k", i)] = "v"
			}
			res := biggestZip(t, env, "edge", meta)

			// One controller adds its finalizer, then as many more as fit
			// the finalizer limits.
			one := proto.Clone(res).(*pbresource.Resource)
			one.Metadata[resource.FinalizerKey] = finalizerNames(1, MaxFinalizerNameLength)
			res = env.write(t, one)
			most := env.server.limits.finalizerBytes()
			n := min(MaxFinalizers, (most+1)/(MaxFinalizerNameLength+1))
			full := proto.Clone(res).(*pbresource.Resource)
			full.Metadata[resource.FinalizerKey] = finalizerNames(n, MaxFinalizerNameLength)
			res = env.write(t, full)

			more := proto.Clone(res).(*pbresource.Resource)
			more.Metadata[resource.FinalizerKey] += " " + strings.Repeat("y", MaxFinalizerNameLength)
			_, err := env.client.Write(testCtx(t), &pbresource.WriteRequest{Resource: more})
			requireCode(t, err, codes.InvalidArgument, `"metadata.finalizers"`)

			require.NoError(t, env.delete(t, res.Id, ""))
			marked := env.mustRead(t, res.Id)
			require.True(t, resource.IsMarkedForDeletion(marked))
			require.LessOrEqual(t, proto.Size(marked), limit)
		})
	}
}
